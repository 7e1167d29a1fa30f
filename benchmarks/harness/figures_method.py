"""The measured figures of docs/method.md and docs/quality.md, each read from the committed result
file it comes from (see :mod:`harness.figures`), and why each other line with a decimal has none.

method.md is mostly the paper's figures, settings and equations, and worked examples that tests
check; its own measurements (§2's masked-token counts, §3b's table, the calibration example) are
read from the committed runs they quote. quality.md's table and the differences its text draws
are read from the ``quality-ablation`` protocol's summary.
"""

from __future__ import annotations

from typing import Any

from harness.figures import Fig, Line, Unmeasured, _row

PAGE = "docs/method.md"
QUALITY = "docs/quality.md"
CURVE = "mslm-curve/summary.json"
ABLATION = "quality-ablation/summary.json"


# the variants whose BC5CDR run the re-run has not reached yet: their BC5CDR cells are still
# the lost run's, quoted from its log (the same command resumes the re-run); none since it ended
NOT_YET_ON_BC5CDR: set[str] = set()


def _ablation(variant: str) -> list[Fig | None]:
    """A quality-ablation row: strict dev and test F1 (%) on NCBI-disease, then on BC5CDR."""
    corpora = ["NCBI-disease-IOB"] + ([] if variant in NOT_YET_ON_BC5CDR else ["BC5CDR-IOB"])
    figures: list[Fig | None] = [
        Fig(ABLATION, ("datasets", corpus, variant, key), "%1")
        for corpus in corpora
        for key in ("dev_f1_mean", "f1_mean")
    ]
    return figures + [None, None] * (2 - len(corpora))


def _gain(variant: str, corpus: str = "NCBI-disease-IOB") -> Fig:
    """A variant's dev F1 over "today"'s, in signed points."""
    at = ("datasets", corpus, variant, "vs_baseline", "dev_f1_diff_mean")
    return Fig(ABLATION, at, "+%1")


def _gains(variant: str) -> list[Fig | None]:
    """A variant's dev gains over "today" on NCBI-disease, then on BC5CDR (the log's until the
    re-run reaches it)."""
    return [_gain(variant), None if variant in NOT_YET_ON_BC5CDR else _gain(variant, "BC5CDR-IOB")]


def _dev(data: dict[str, Any], corpus: str, variant: str, than: str) -> float:
    """How many dev F1 points ``variant`` is above ``than`` on ``corpus``."""
    runs = data["datasets"][corpus]
    return 100 * (float(runs[variant]["dev_f1_mean"]) - float(runs[than]["dev_f1_mean"]))


HONEST = "honest-mslm/runs/NCBI-disease-IOB"
PAPER_RUN = f"{HONEST}/mslm-paper/seed1.json"
CALIBRATED = "baseline-cpu/runs/NCBI-disease-IOB@2000/default"


def _honest(variant: str) -> list[Fig]:
    """A row of §3b's table: the ``honest-mslm`` screen's seed-1 strict test F1 of ``variant``
    on unmasked input, then (MSLM variants) on gold-masked input."""
    run = f"{HONEST}/{variant}/seed1.json"
    honest = Fig(run, ("test", "strict", "f1"), "3")
    return (
        [honest]
        if variant == "vanilla"
        else [honest, Fig(run, ("test_leaky", "strict", "f1"), "3")]
    )


def _reference(data: dict[str, Any], which: int) -> float:
    """The authors' rule's weights (BLM, ELM) on a run's masked-token counts."""
    from mslm_core.weights import mask_specific_weights

    counts = data["masking"]
    return mask_specific_weights(counts["n_elm"], counts["n_blm"], rule="reference")[which]


def _calibration(seed: int) -> list[Fig]:
    """A default NCBI-disease run's test ECE before and after its temperature."""
    at = ("test", "calibration")
    run = f"{CALIBRATED}/seed{seed}.json"
    return [Fig(run, (*at, "before", "ece"), "3"), Fig(run, (*at, "after", "ece"), "3")]


LINES: tuple[Line, ...] = (
    # -- §2: the masked-token counts of one masking pass, and what each rule makes of them
    _row(
        PAGE,
        "NCBI-disease's first 2,000 training sentences (`honest-mslm`'s",
        Fig(PAPER_RUN, ("settings", "max_train_sentences"), ","),
        Fig(PAPER_RUN, ("seed",), "0"),
    ),
    _row(
        PAGE,
        "random sub-words of",
        *(Fig(PAPER_RUN, ("masking", k), ",") for k in ("n_elm", "n_blm", "n_tokens")),
        *(Fig(PAPER_RUN, ("masking", "weights", k), "1") for k in ("elm", "blm")),
    ),
    _row(
        PAGE,
        "on that run's counts)",
        Fig(PAPER_RUN, lambda d: _reference(d, 1), "3"),
        Fig(PAPER_RUN, lambda d: _reference(d, 0), "3"),
    ),
    # -- §3b: the honest-mslm screen (seed 1)
    _row(
        PAGE,
        "(MiniLM, NCBI-disease's first 2,000 training sentences, 3 epochs",
        Fig(f"{HONEST}/vanilla/seed1.json", ("settings", "max_train_sentences"), ","),
        Fig(f"{HONEST}/vanilla/seed1.json", ("settings", "epochs"), "0"),
        Fig(f"{HONEST}/vanilla/seed1.json", ("seed",), "0"),
    ),
    _row(PAGE, "| vanilla (`vanilla`) |", *_honest("vanilla")),
    _row(PAGE, "| MSLM, detection on the masked pass (`mslm-paper`) |", *_honest("mslm-paper")),
    _row(PAGE, "| MSLM, detection on a second, clean pass", *_honest("mslm-clean")),
    _row(
        PAGE,
        "| the same, MLM loss × 0.1 (`mslm-clean-lambda0.1`) |",
        Fig(f"{HONEST}/mslm-clean-lambda0.1/seed1.json", ("settings", "mlm_weight"), "1"),
        *_honest("mslm-clean-lambda0.1"),
    ),
    _row(
        PAGE,
        "| MSLM, ELM 0.5, detection ignoring masked positions",
        Fig(f"{HONEST}/mslm-ignore/seed1.json", ("settings", "elm_rate"), "1"),
        *_honest("mslm-ignore"),
    ),
    _row(
        PAGE,
        "| 1 epoch of weighted ELM-BLM MLM, then 3 epochs vanilla (`mslm-tapt`) |",
        Fig(f"{HONEST}/mslm-tapt/seed1.json", ("settings", "tapt_epochs"), "0"),
        Fig(f"{HONEST}/mslm-tapt/seed1.json", ("settings", "epochs"), "0"),
        *_honest("mslm-tapt"),
    ),
    # -- §3: the detection temperature on NCBI-disease's default runs
    _row(
        PAGE,
        "(the baseline protocol's default runs: MiniLM, the first 2,000",
        Fig(f"{CALIBRATED}/seed1.json", ("settings", "max_train_sentences"), ","),
        Fig(f"{CALIBRATED}/seed1.json", ("seed",), "0"),
        Fig(f"{CALIBRATED}/seed3.json", ("seed",), "0"),
    ),
    _row(
        PAGE,
        "that gives T =",
        *(
            Fig(f"{CALIBRATED}/seed{k}.json", ("test", "calibration", "detection_temperature"), "2")
            for k in (1, 2, 3)
        ),
        *_calibration(1),
        *_calibration(2),
    ),
    _row(
        PAGE,
        "0.060. NCBI has one type, so its type temperature stays",
        *_calibration(3),
        Fig(f"{CALIBRATED}/seed3.json", ("test", "calibration", "type_temperature"), "0"),
    ),
    # -- 3b. Honest evaluation: the default the learning curve picked
    _row(
        PAGE,
        "controls included: today `auto`, plain fine-tuning (",
        None,  # 3 epochs: vanilla's setting
        Fig(CURVE, ("decision", "auto", 0, "up_to_sentences"), ","),
    ),
    # -- quality.md: the ablation table, every row from the re-run's summary (seed 1)
    _row(QUALITY, "| today |", *_ablation("today")),
    _row(QUALITY, "| learning rate 1e-4 |", *_ablation("lr-1e-4")),
    _row(QUALITY, "| linear B-X/I-X head over all types", *_ablation("head-linear")),
    _row(QUALITY, "| Viterbi decoding, no I after O", *_ablation("viterbi")),
    _row(QUALITY, "| last epoch instead of the best on dev", *_ablation("select-last")),
    _row(QUALITY, "| 5 epochs |", None, *_ablation("epochs-5")),
    _row(QUALITY, "| sentence packing (windows of neighbouring", None, *_ablation("pack")),
    _row(QUALITY, "| sentence packing, batch 4", None, *_ablation("pack-batch4")),
    _row(QUALITY, "| **recipe**: linear head + Viterbi + 1e-4 |", *_ablation("recipe")),
    _row(QUALITY, "| recipe + packing |", *_ablation("recipe-pack")),
    _row(QUALITY, "| recipe + packing, batch 4 |", None, *_ablation("recipe-pack-batch4")),
    _row(
        QUALITY,
        "| recipe at 2e-4 (**the default** for MiniLM) |",
        *_ablation("recipe-lr2e-4"),
    ),
    _row(QUALITY, "| recipe at 3e-4 |", *_ablation("recipe-lr3e-4")),
    _row(
        QUALITY,
        "| recipe at 2e-4, two-stage MSLM (`mslm_tapt`) |",
        *_ablation("recipe-lr2e-4-tapt"),
    ),
    _row(
        QUALITY,
        "| textbook `AutoModelForTokenClassification`, 1e-4 |",
        *_ablation("textbook"),
    ),
    _row(QUALITY, "| textbook at 2e-4 |", *_ablation("textbook-lr2e-4")),
    _row(QUALITY, "**The learning rate was most of the gap**", *_gains("lr-1e-4")),
    _row(
        QUALITY,
        "2e-4 was chosen on NCBI-disease, where 3e-4 was within",
        Fig(ABLATION, lambda d: _dev(d, "NCBI-disease-IOB", "recipe-lr3e-4", "recipe-lr2e-4"), "1"),
    ),
    _row(
        QUALITY,
        "put 3e-4 ahead on dev there too",
        Fig(ABLATION, lambda d: _dev(d, "BC5CDR-IOB", "recipe-lr3e-4", "recipe-lr2e-4"), "+1"),
    ),
    _row(QUALITY, "**The head is the rest**", *_gains("head-linear")),
    _row(QUALITY, "**Viterbi** fixes argmax's I-after-O", *_gains("viterbi")),
    _row(QUALITY, "with `--select last` on NCBI-disease", _gain("select-last")),
    _row(QUALITY, "More epochs help a little on their own", None, *_gains("epochs-5")),  # 5 epochs
)

_PAPER = "the paper's figures"
_SETTING = "the paper's setting"
_CHECKED = "a worked example that tests/test_weights.py checks"
_CLAMP = "eq. 3's constant, the 0.5 sensitivity threshold"
UNMEASURED: tuple[Unmeasured, ...] = (
    # -- method.md
    Unmeasured(PAGE, "arXiv 2403.18025", "the paper's arXiv id"),
    Unmeasured(PAGE, "reports +3.2 exact-match points", f"{_PAPER} (its average gain)"),
    Unmeasured(
        PAGE,
        "`elm_rate = 0.25` → one mention",
        "a worked example that tests/test_masking.py checks",
    ),
    Unmeasured(PAGE, "The paper's defaults are `elm_rate = 1.0`", f"{_SETTING}s: rates and grid"),
    Unmeasured(PAGE, "0.75, 1.0} × BLM ∈ {0, 0.075", f"{_SETTING}s: the rates' grid"),
    Unmeasured(PAGE, '(eq. 3: the 0.5 "sensitivity threshold")', _CLAMP),
    Unmeasured(PAGE, "Checked by `tests/test_weights.py`: 1,000 ELM", _CHECKED),
    Unmeasured(PAGE, "the softmax and about 0.3775 / 0.6225", _CHECKED),
    Unmeasured(PAGE, "no BLM token (`blm_rate = 0`) also ends at", _CHECKED),
    Unmeasured(PAGE, "`w_ELM = max(0.5, 1 − N_BLM/total)`", f"{_CLAMP}, in the authors' code"),
    Unmeasured(PAGE, "At `elm_rate = 1.0` every gold entity", f"{_SETTING}: the default ELM rate"),
    Unmeasured(PAGE, "vanilla → MSLM (ELM 1, BLM 0.075; Tables 3 and 8)", f"{_SETTING}s"),
    Unmeasured(PAGE, "| BC2GM |", f"{_PAPER} (Tables 3 and 8)"),
    Unmeasured(PAGE, "| NCBI-disease |", f"{_PAPER} (Tables 3 and 8)"),
    Unmeasured(PAGE, "| BC5CDR-chem |", f"{_PAPER} (Tables 3 and 8)"),
    Unmeasured(PAGE, "| BC5CDR-disease |", f"{_PAPER} (Tables 3 and 8)"),
    Unmeasured(PAGE, "| JNLPBA |", f"{_PAPER} (Tables 3 and 8)"),
    Unmeasured(PAGE, "| EBM-NLP |", f"{_PAPER} (Tables 3 and 8)"),
    Unmeasured(PAGE, "Test F1, BioBERT → MSLM-BioBERT (Table 10)", f"{_PAPER} (Table 10)"),
    Unmeasured(PAGE, "89.71 → 91.91, BC5CDR-chem", f"{_PAPER} (Table 10)"),
    Unmeasured(PAGE, "the mask weights (Table 6) MSLM loses", f"{_PAPER} (Tables 6 and 10)"),
    Unmeasured(PAGE, "fine-tuning (BLURB): BC5-chem", f"{_PAPER} (BLURB's PubMedBERT scores)"),
    Unmeasured(PAGE, "JNLPBA 79.10. The same figures", f"{_PAPER} (BLURB's PubMedBERT scores)"),
)
