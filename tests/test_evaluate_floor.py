"""A model's floor (mslm_core.evaluate.floor_warnings): predicting nothing on dev, or a dev
F1 under the job's min_dev_f1, is said; anything else is not."""

from mslm_core.evaluate import floor_warnings


def report(f1: float, n_pred: int, sources: dict[str, float] | None = None) -> dict:
    out = {"strict": {"f1": f1}, "n_pred": n_pred, "n_gold": 40}
    if sources:
        out["macro_f1"] = sum(sources.values()) / len(sources)
    return out


def test_a_model_that_predicts_nothing_is_below_any_floor():
    (why,) = floor_warnings(report(0.0, 0), 0.0)
    assert "predicts no entity on dev (40 annotated)" in why


def test_the_floor_is_the_selection_f1():
    assert floor_warnings(report(0.5, 10), 0.0) == []
    assert floor_warnings(report(0.5, 10), 0.5) == []
    (why,) = floor_warnings(report(0.5, 10), 0.6)
    assert why == "dev F1 0.500 is below the job's floor (min_dev_f1 0.6)"
    # several corpora: their macro F1 is what selection and the floor read
    assert floor_warnings(report(0.9, 10, {"a": 0.2, "b": 0.4}), 0.5) != []
