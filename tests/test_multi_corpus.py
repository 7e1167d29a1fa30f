"""Training on several corpora mapped onto one schema (issue 28): type maps, partial labels
(a type a corpus does not annotate is not pushed to O), sampling weights, judging each corpus
on its own types, every strategy and both heads."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest
import torch
from conftest import build_tiny_encoder

from mslm_core.config import TrainConfig
from mslm_core.corpus import Mention, read_corpus
from mslm_core.errors import ConfigError, InferenceError
from mslm_core.features import WindowBuilder
from mslm_core.metrics import evaluation_report, judge, type_rows
from mslm_core.partial import partial_label_loss, word_allowed
from mslm_core.sources import load_training_data, parse_sources
from mslm_core.train import Trainer
from mslm_core.typemap import TypeMap, label_set

# Corpus A annotates chemicals and diseases (BC5CDR-like); corpus B body sites and findings,
# with procedures that may be tests or treatments and values that may be results or nothing
A = [
    {"text": "Aspirin reduces fever .", "entities": [[0, 7, "Chemical"], [16, 21, "Disease"]]},
    {
        "text": "Cisplatin caused renal failure .",
        "entities": [[0, 9, "Chemical"], [17, 30, "Disease"]],
    },
    {"text": "The liver was normal .", "entities": []},
    {"text": "Heparin was given .", "entities": [[0, 7, "Chemical"]]},
]
B = [
    {
        "text": "Pain in the liver after biopsy .",
        "entities": [[0, 4, "Sign"], [12, 17, "Body"], [24, 30, "Proc"]],
    },
    {
        "text": "Fever and liver biopsy positive .",
        "entities": [[0, 5, "Sign"], [10, 15, "Body"], [16, 22, "Proc"], [23, 31, "Value"]],
    },
    {"text": "Aspirin was given for pain .", "entities": [[22, 26, "Sign"]]},
]
MAP_A = {"Chemical": "Drug", "Disease": "Problem"}
MAP_B = {
    "Sign": "Problem",
    "Body": "Anatomy",
    "Proc": ["Procedure", "Test"],
    "Value": ["Result", "O"],
}


def write_jsonl(path: Path, rows: list[dict]) -> Path:
    with open(path, "w", encoding="utf-8") as fh:
        for row in rows:
            ents = [{"start": a, "end": b, "label": t} for a, b, t in row["entities"]]
            fh.write(json.dumps({"text": row["text"], "entities": ents}) + "\n")
    return path


@pytest.fixture(scope="module")
def corpora(tmp_path_factory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("multi")
    return {"A": write_jsonl(root / "a.jsonl", A), "B": write_jsonl(root / "b.jsonl", B)}


@pytest.fixture(scope="module")
def encoder(tmp_path_factory) -> Path:
    words = {w.lower() for row in A + B for w in row["text"].split()}
    return build_tiny_encoder(tmp_path_factory.mktemp("enc") / "tiny", sorted(words))


def sources(corpora: dict[str, Path], **weights: float) -> list[dict]:
    return [
        {
            "name": "A",
            "train": str(corpora["A"]),
            "dev": str(corpora["A"]),
            "type_map": MAP_A,
            "weight": weights.get("A", 1.0),
        },
        {
            "name": "B",
            "train": str(corpora["B"]),
            "dev": str(corpora["B"]),
            "test": str(corpora["B"]),
            "type_map": MAP_B,
            "weight": weights.get("B", 1.0),
        },
    ]


# -- type maps ----------------------------------------------------------------------------------
def test_type_map_renames_drops_and_lists():
    tm = TypeMap.parse(
        {"Sign": "Problem", "Coref": None, "Proc": ["Test", "Procedure"], "Value": ["O", "Result"]}
    )
    assert tm.label("Sign") == "Problem"
    assert tm.label("Coref") is None
    assert tm.label("Proc") == "Procedure|Test"
    assert tm.label("Value") == "O|Result"
    assert tm.label("Other") == "Other"  # not named: kept
    assert label_set("O|Result") == {"O", "Result"}
    assert tm.targets(["Sign", "Coref", "Proc", "Value"]) == {
        "Problem",
        "Procedure",
        "Test",
        "Result",
    }
    assert TypeMap.parse(tm.to_json()) == tm
    wild = TypeMap.parse({"Sign": "Problem", "*": None})
    assert wild.label("Other") is None and wild.label("Sign") == "Problem"


@pytest.mark.parametrize(
    ("bad", "says"),
    [
        ({"Sign": "O"}, r"type_map.Sign: type 'O'"),
        ({"Sign": ["O"]}, r"type_map.Sign: a list needs at least one type besides 'O'"),
        ({"Sign": "A|B"}, r"may not contain '\|'"),
        ({"Sign": "has space"}, "without spaces"),
        ({"Sign": 3}, "must be a type name, a list of them or null"),
        ([["Sign", "Problem"]], "must be an object"),
    ],
)
def test_type_map_refuses_bad_entries_naming_them(bad, says):
    with pytest.raises(ConfigError, match=says):
        TypeMap.parse(bad)


def test_sources_are_checked_with_their_index_and_field(corpora):
    good = sources(corpora)
    with pytest.raises(ConfigError, match=r"sources\[1\].weight: must be in \(0, 100\]"):
        parse_sources([good[0], {**good[1], "weight": 0}])
    with pytest.raises(ConfigError, match=r"sources\[1\].name: 'A' is used twice"):
        parse_sources([good[0], {**good[1], "name": "A"}])
    with pytest.raises(ConfigError, match=r"sources\[0\]: unknown field\(s\) typemap"):
        parse_sources([{**good[0], "typemap": {}}])
    with pytest.raises(ConfigError, match="at least one corpus needs a dev split"):
        parse_sources([{k: v for k, v in s.items() if k != "dev"} for s in good])
    with pytest.raises(ConfigError, match="either train/dev/test or sources"):
        TrainConfig(train="x", dev="y", sources=good)


def test_each_corpus_knows_what_it_annotates(corpora):
    data = load_training_data(TrainConfig(sources=sources(corpora)))
    assert data.types == ["Anatomy", "Drug", "Problem", "Procedure", "Result", "Test"]
    a, b = data.sources
    assert a.annotated == {"Drug", "Problem"}
    assert b.annotated == {"Problem", "Anatomy", "Procedure", "Test", "Result"}
    ids = {t: i for i, t in enumerate(data.types)}
    assert data.unannotated(0, ids) == {
        ids["Anatomy"],
        ids["Procedure"],
        ids["Result"],
        ids["Test"],
    }
    assert data.unannotated(1, ids) == {ids["Drug"]}
    train = data.merged("train")
    assert [s.annotated for s in train.sentences] == [a.annotated] * 4 + [b.annotated] * 3
    assert [m.label for m in train.sentences[5].mentions] == [
        "Problem",
        "Anatomy",
        "Procedure|Test",
        "O|Result",
    ]


# -- partial labels -----------------------------------------------------------------------------
def test_allowed_tags_per_word():
    ids = {"Anatomy": 0, "Drug": 1, "Problem": 2, "Test": 3}
    c = len(ids)
    mentions = [Mention(0, 2, "Problem"), Mention(3, 4, "Anatomy|Test"), Mention(5, 6, "O|Drug")]
    allowed = word_allowed(7, mentions, ids, unannotated={ids["Drug"]})
    tags = lambda row: {i for i in range(2 * c + 1) if row[i]}  # noqa: E731
    o, b_drug, i_drug = 2 * c, ids["Drug"], c + ids["Drug"]
    assert tags(allowed[0]) == {ids["Problem"]}  # B-Problem only
    assert tags(allowed[1]) == {c + ids["Problem"]}  # I-Problem only
    assert tags(allowed[2]) == {o, b_drug, i_drug}  # O, or a drug the corpus does not mark
    assert tags(allowed[3]) == {ids["Anatomy"], ids["Test"]}
    assert tags(allowed[5]) == {o, b_drug, i_drug}  # "O|Drug": O (or an unannotated Drug)
    assert tags(allowed[6]) == {o, b_drug, i_drug}


def test_partial_label_loss_is_cross_entropy_for_one_tag_and_marginal_otherwise():
    torch.manual_seed(0)
    logits = torch.randn(2, 3, 5)
    logp = logits.log_softmax(-1)
    one = torch.zeros(2, 3, 5, dtype=torch.bool)
    one[..., 4] = True
    positions = torch.ones(2, 3, dtype=torch.bool)
    ce = torch.nn.functional.cross_entropy(logits.reshape(-1, 5), torch.full((6,), 4))
    assert torch.allclose(partial_label_loss(logp, one, positions), ce)
    two = one.clone()
    two[..., 0] = True
    want = -torch.log(logp.exp()[..., [0, 4]].sum(-1)).mean()
    assert torch.allclose(partial_label_loss(logp, two, positions), want)
    assert float(partial_label_loss(logp, one, torch.zeros_like(positions))) == 0.0


def test_windows_carry_allowed_tags_and_only_sure_mentions(corpora, encoder):
    from transformers import AutoTokenizer

    data = load_training_data(TrainConfig(sources=sources(corpora)))
    ids = {t: i for i, t in enumerate(data.types)}
    builder = WindowBuilder(AutoTokenizer.from_pretrained(str(encoder)), 32)
    b = data.sources[1].splits["train"]
    words = [s.words for s in b.sentences]
    wins = builder.training_windows(
        words, [s.mentions for s in b.sentences], ids, [data.unannotated(1, ids)] * len(words)
    )
    fever = wins[1]  # "Fever and liver biopsy positive ."
    # the procedure (Procedure|Test) is masked and pooled as a mention of unknown type (-1);
    # the value that may be nothing (O|Result) is not a mention
    assert [t for _, _, t in fever.mentions] == [ids["Problem"], ids["Anatomy"], -1]
    assert fever.allowed is not None and fever.allowed.shape == (len(fever), 2 * len(ids) + 1)
    first = fever.first_subword()
    c = len(ids)
    assert set(np.nonzero(fever.allowed[first[3]])[0]) == {ids["Procedure"], ids["Test"]}
    assert set(np.nonzero(fever.allowed[first[4]])[0]) == {
        ids["Result"],
        2 * c,
        ids["Drug"],
        c + ids["Drug"],
    }
    assert not fever.allowed[0].any()  # [CLS]


# -- judging each corpus on its own types ---------------------------------------------------------
def test_judge_keeps_to_the_corpus_s_types():
    gold = [Mention(0, 1, "Problem"), Mention(2, 3, "Procedure|Test"), Mention(4, 5, "O|Result")]
    pred = [
        Mention(0, 1, "Problem"),
        Mention(2, 3, "Test"),  # any listed type counts
        Mention(4, 5, "Result"),  # a mention that may be nothing: not counted either way
        Mention(6, 7, "Anatomy"),  # a type this corpus does not annotate: not judged
        Mention(8, 9, "Problem"),  # a false positive
    ]
    g, p = judge(gold, pred, {"Problem", "Procedure", "Test", "Result"})
    assert g == gold[:2]
    assert p == [
        Mention(0, 1, "Problem"),
        Mention(2, 3, "Procedure|Test"),
        Mention(8, 9, "Problem"),
    ]
    report = evaluation_report(
        [gold], [pred], [10], annotated=[{"Problem", "Procedure", "Test", "Result"}]
    )
    assert report["strict"]["recall"] == 1.0 and math.isclose(report["strict"]["precision"], 2 / 3)
    assert "Anatomy" not in report["per_type"]


def test_types_a_listing_label_links_are_scored_as_one_row():
    """A corpus that does not say whether a procedure is a Test scores Procedure and Test as
    one row: a Test prediction that misses a Procedure|Test mention counts against that row's
    precision, not against Test's while Procedure|Test keeps a precision of 1."""
    annotated = {"Problem", "Procedure", "Test"}
    gold = [
        [Mention(0, 1, "Procedure|Test"), Mention(2, 3, "Test"), Mention(4, 5, "Problem")],
        [Mention(0, 2, "Procedure|Test"), Mention(3, 4, "Procedure")],
    ]
    pred = [
        [Mention(0, 1, "Procedure"), Mention(2, 3, "Test"), Mention(4, 5, "Problem")],
        [Mention(0, 1, "Test"), Mention(3, 4, "Test")],  # too short; the wrong type
    ]
    report = evaluation_report(gold, pred, [6, 5], annotated=[annotated] * 2)
    assert type_rows(["Problem", "Procedure|Test", "Test", "Procedure", "O|Result"]) == {
        "Problem": "Problem",
        "Procedure|Test": "Procedure|Test",
        "Test": "Procedure|Test",
        "Procedure": "Procedure|Test",
        "O|Result": "Result",
    }
    assert set(report["per_type"]) == {"Problem", "Procedure|Test"}
    row = report["per_type"]["Procedure|Test"]
    assert row["support"] == 4
    assert row["precision"] == row["recall"] == 0.5  # 2 of 4 predictions, 2 of 4 mentions
    assert row["overlap"]["precision"] == row["overlap"]["recall"] == 0.75
    assert report["per_type"]["Problem"]["f1"] == 1.0
    assert math.isclose(report["strict"]["f1"], 3 / 5)


def test_overlap_scores_beside_strict():
    gold = [[Mention(0, 2, "Problem"), Mention(3, 4, "Drug")]]
    pred = [[Mention(1, 2, "Problem"), Mention(3, 4, "Problem")]]
    report = evaluation_report(gold, pred, [5])
    assert report["strict"]["f1"] == 0.0
    assert report["overlap"] == {"precision": 0.5, "recall": 0.5, "f1": 0.5}
    assert report["per_type"]["Problem"]["overlap"]["recall"] == 1.0


# -- training ------------------------------------------------------------------------------------
def test_an_unannotated_type_is_not_pushed_to_o(corpora, encoder):
    """The loss on a word corpus A leaves O while the model calls it an Anatomy (a type A does
    not annotate) is near zero with partial labels, and large without them."""
    cfg = TrainConfig(sources=sources(corpora), base_model=str(encoder), epochs=1, batch_size=8)
    trainer = Trainer(cfg, Path("/nonexistent/out"))
    trainer.prepare()
    ids = {t: i for i, t in enumerate(trainer.types)}
    c = len(ids)
    liver = next(
        w
        for w in trainer.windows
        if trainer.window_source[w_index(trainer, w)] == 0 and "liver" in words_of(trainer, w)
    )
    batch = trainer.clean_collator([liver], [np.random.default_rng(0)])
    pos = liver.first_subword()[words_of(trainer, liver).index("liver")]
    logits = torch.full((1, len(liver), 2 * c + 1), -10.0)
    logits[0, :, 2 * c] = 10.0  # every word O…
    logits[0, pos, 2 * c] = -10.0
    logits[0, pos, ids["Anatomy"]] = 10.0  # …but "liver": B-Anatomy
    positions = (batch["detection_labels"] != -100) & batch["allowed"].any(-1)
    partial = partial_label_loss(logits.log_softmax(-1), batch["allowed"], positions)
    plain = torch.nn.functional.cross_entropy(
        logits[positions], torch.full((int(positions.sum()),), 2 * c)
    )
    assert float(partial) < 1e-3
    assert float(plain) > 1.0  # what the loss would be without partial labels


def w_index(trainer: Trainer, window) -> int:
    return next(i for i, w in enumerate(trainer.windows) if w is window)


def words_of(trainer: Trainer, window) -> list[str]:
    sentence = trainer.corpora["train"].sentences[window.sentence]
    return sentence.words[window.word_start : window.word_end]


def test_weights_sample_each_corpus_per_epoch(corpora, encoder):
    cfg = TrainConfig(sources=sources(corpora, A=0.5, B=2.0), base_model=str(encoder), epochs=1)
    trainer = Trainer(cfg, Path("/nonexistent/out"))
    trainer.prepare()
    src = trainer.window_source
    n_a, n_b = int((src == 0).sum()), int((src == 1).sum())
    for epoch in (0, 1):
        chosen = trainer.epoch_windows(epoch)
        assert int((src[chosen] == 0).sum()) == round(0.5 * n_a)
        assert int((src[chosen] == 1).sum()) == 2 * n_b
    assert trainer.state.steps_per_epoch == math.ceil((round(0.5 * n_a) + 2 * n_b) / cfg.batch_size)
    assert (
        not np.array_equal(np.sort(trainer.epoch_windows(0)), np.sort(trainer.epoch_windows(1)))
        or n_a < 3
    )


@pytest.mark.parametrize(
    ("strategy", "head"),
    [
        ("vanilla", "linear"),
        ("mslm", "linear"),
        ("mslm_tapt", "linear"),
        ("span", "linear"),
        ("mslm", "paper"),
    ],
)
def test_a_multi_corpus_job_trains_end_to_end(corpora, encoder, tmp_path, strategy, head):
    cfg = TrainConfig(
        sources=sources(corpora),
        base_model=str(encoder),
        strategy=strategy,
        head=head,
        epochs=2,
        batch_size=4,
        learning_rate=5e-3,
        mlm_head_warmup_steps=0,
        patience=0,
    )
    result = Trainer(cfg, tmp_path / "bundle").fit()
    manifest = json.loads((tmp_path / "bundle" / "manifest.json").read_text())
    assert manifest["types"] == ["Anatomy", "Drug", "Problem", "Procedure", "Result", "Test"]
    assert [s["name"] for s in manifest["sources"]] == ["A", "B"]
    assert manifest["sources"][1]["annotated"] == [
        "Anatomy",
        "Problem",
        "Procedure",
        "Result",
        "Test",
    ]
    metrics = result["metrics"]
    assert set(metrics["dev"]["sources"]) == {"A", "B"}
    assert math.isclose(
        metrics["dev"]["macro_f1"],
        (
            metrics["dev"]["sources"]["A"]["strict"]["f1"]
            + metrics["dev"]["sources"]["B"]["strict"]["f1"]
        )
        / 2,
    )
    assert "test" in metrics and "sources" not in metrics["test"]  # only B has a test split
    assert all(np.isfinite(h["train_loss"]) for h in result["history"])
    assert "dev_sources" in result["history"][-1]


def styled_trainer(
    corpora: dict[str, Path], tmp_path: Path, weights: dict[str, float] | None = None, **options
) -> Trainer:
    """A trained run on A and B with source styles (their names in the encoder's vocabulary,
    so that they are not [UNK]), its bundle in tmp_path/bundle."""
    vocab = {w.lower() for row in A + B for w in row["text"].split()} | {"a", "b"}
    enc = build_tiny_encoder(tmp_path / "enc", sorted(vocab))
    settings = dict(strategy="vanilla", epochs=1, batch_size=4, learning_rate=5e-3, patience=0)
    cfg = TrainConfig(
        sources=sources(corpora, **(weights or {})),
        base_model=str(enc),
        source_styles=True,
        **{**settings, **options},
    )
    trainer = Trainer(cfg, tmp_path / "bundle")
    trainer.fit()
    return trainer


def test_source_styles_open_each_corpus_s_windows_with_its_name(corpora, tmp_path):
    from mslm_core.inference import EntityExtractor

    trainer = styled_trainer(corpora, tmp_path)
    builder = trainer.builder
    opening = {name: builder.prefixes[name] for name in ("A", "B")}
    assert opening["A"][: len(builder.prefix)] == builder.prefix
    assert opening["A"] != opening["B"] and len(opening["A"]) > len(builder.prefix)
    for window, k in zip(trainer.windows, trainer.window_source, strict=True):
        n = len(opening["AB"[k]])
        assert window.input_ids[:n].tolist() == opening["AB"[k]]
        assert (window.word_index[:n] == -1).all() and window.word_index[n] >= 0
        assert window.labels is not None and (window.labels[:n] == -100).all()
    # each corpus's dev sentences are read as its own
    assert trainer.styles_of("dev") == ["A"] * len(A) + ["B"] * len(B)
    manifest = json.loads((tmp_path / "bundle" / "manifest.json").read_text())
    assert (manifest["styles"], manifest["style"]) == (["A", "B"], "A")

    # the bundle reads text as the first corpus's, and a call may read it as another's
    predictor = EntityExtractor.from_bundle(tmp_path / "bundle", backend="torch").predictor
    words = [s.words for s in trainer.corpora["dev"].sentences]
    assert predictor.style == "A"
    assert predictor.predict_words(words) == predictor.predict_words(words, styles=["A"] * 7)
    as_a = predictor.raw_predictions(words, styles=["A"] * 7).word_probs
    as_b = predictor.raw_predictions(words, styles=["B"] * 7).word_probs
    assert any(not np.allclose(x, y) for x, y in zip(as_a, as_b, strict=True))
    with pytest.raises(ValueError, match="unknown style 'C'"):
        predictor.predict_words(words[:1], styles=["C"])
    as_b_served = EntityExtractor.from_bundle(tmp_path / "bundle", backend="torch", style="B")
    assert as_b_served.predictor.predict_words(words) == predictor.predict_words(
        words, styles=["B"] * 7
    )
    with pytest.raises(InferenceError, match="style 'C': this model's styles are A, B"):
        EntityExtractor.from_bundle(tmp_path / "bundle", backend="torch", style="C")
    # trained without a blank style, it has no reading without a name
    with pytest.raises(InferenceError, match=r"style '': this model's styles are A, B$"):
        EntityExtractor.from_bundle(tmp_path / "bundle", backend="torch", style="")


def test_a_blank_style_reads_a_share_of_windows_and_the_served_text_with_no_name(corpora, tmp_path):
    from mslm_core.inference import EntityExtractor

    trainer = styled_trainer(corpora, tmp_path, {"A": 0.5}, blank_style=0.5, epochs=2)
    n, builder, windows = trainer.n_styled, trainer.builder, trainer.windows
    # every styled window has a blank copy: the same text, labels and corpus, no name
    assert len(windows) == 2 * n and (trainer.window_source[:n] == trainer.window_source[n:]).all()
    for i, (styled, blank) in enumerate(zip(windows[:n], windows[n:], strict=True)):
        k = len(builder.prefixes["AB"[trainer.window_source[i]]])
        p = len(builder.prefix)
        assert blank.input_ids[:p].tolist() == builder.prefix and blank.word_index[p] >= 0
        assert blank.input_ids[p:].tolist() == styled.input_ids[k:].tolist()
        assert blank.labels is not None and styled.labels is not None
        assert blank.labels[p:].tolist() == styled.labels[k:].tolist()
    # each epoch draws its windows by weight as without the blank style, then reads about
    # blank_style of them with none, drawn anew
    draws = [trainer.epoch_windows(e) for e in range(20)]
    plain = [draws_without_blank(trainer, e) for e in range(20)]
    for chosen, base in zip(draws, plain, strict=True):
        assert np.array_equal(chosen % n, base)
    share = np.mean(np.concatenate([chosen >= n for chosen in draws]))
    assert 0.35 < share < 0.65
    assert not np.array_equal(draws[0] >= n, draws[1] >= n)

    # the bundle reads text with no name unless asked for a corpus's
    manifest = json.loads((tmp_path / "bundle" / "manifest.json").read_text())
    assert (manifest["styles"], manifest["style"], manifest["blank_style"]) == (["A", "B"], "", 0.5)
    predictor = EntityExtractor.from_bundle(tmp_path / "bundle", backend="torch").predictor
    words = [s.words for s in trainer.corpora["dev"].sentences]
    assert predictor.style == ""
    as_none = predictor.raw_predictions(words).word_probs
    as_a = predictor.raw_predictions(words, styles=["A"] * 7).word_probs
    assert any(not np.allclose(x, y) for x, y in zip(as_none, as_a, strict=True))
    as_a_served = EntityExtractor.from_bundle(tmp_path / "bundle", backend="torch", style="A")
    assert as_a_served.predictor.predict_words(words) == predictor.predict_words(
        words, styles=["A"] * 7
    )
    with pytest.raises(InferenceError, match="style 'C': this model's styles are A, B, ''"):
        EntityExtractor.from_bundle(tmp_path / "bundle", backend="torch", style="C")
    as_none_asked = EntityExtractor.from_bundle(tmp_path / "bundle", backend="torch", style="")
    assert as_none_asked.predictor.predict_words(words) == predictor.predict_words(words)


def test_a_call_reads_its_texts_in_the_style_it_asks(corpora, tmp_path, monkeypatch):
    from mslm_core.errors import StyleError
    from mslm_core.inference import EntityExtractor
    from mslm_core.pipeline import AnnotationPipeline

    trainer = styled_trainer(corpora, tmp_path, epochs=2)
    served = EntityExtractor.from_bundle(tmp_path / "bundle", backend="torch")  # read as A
    as_b = EntityExtractor.from_bundle(tmp_path / "bundle", backend="torch", style="B")
    texts = [" ".join(s.words) for s in trainer.corpora["dev"].sentences]
    assert served.annotate(texts, style="B") == as_b.annotate(texts)
    assert served.annotate(texts, style="A") == served.annotate(texts)
    # each text of a plan (the service's micro-batch of several requests) is read as its own
    read: list[list[str] | None] = []
    prepare = served.predictor.prepare_chunk

    def recorded(sentences, extra_spans=(), groups=None, styles=None):
        read.append(None if styles is None else list(styles))
        return prepare(sentences, extra_spans, groups, styles)

    monkeypatch.setattr(served.predictor, "prepare_chunk", recorded)
    asked = ["B", None, "A", "B", None, None, "B"]
    plan = served.plan(texts, asked)
    while not plan.done:
        step = plan.next_step()
        assert step is not None
        step()
    # one sentence per dev text, read in its text's style (None: the model's own)
    assert read == [["B", "A", "A", "B", "A", "A", "B"]]
    want = [
        (as_b if style == "B" else served).annotate([t])[0]
        for t, style in zip(texts, asked, strict=True)
    ]
    # the same entities; their scores equal up to float noise (a mixed batch pads otherwise)
    got = plan.result()
    spans = lambda results: [[(e.start, e.end, e.type) for e in ents] for ents in results]  # noqa: E731
    assert spans(got) == spans(want)
    scores = lambda results: [  # noqa: E731
        (e.confidence, e.detection_score, e.type_score) for ents in results for e in ents
    ]
    assert np.allclose(scores(got), scores(want), atol=1e-5)
    assert [e.text for ents in want for e in ents]  # the comparison is of entities, not []
    read.clear()
    served.plan(texts)
    assert read == [None]
    # a style the model was not trained with is refused, naming those it was: by the engine,
    # and by the pipeline's options, checked once before a plan is made
    with pytest.raises(StyleError, match=r"style 'C': this model's styles are A, B$"):
        served.annotate(texts, style="C")
    with pytest.raises(StyleError, match=r"style '': this model's styles are A, B$"):
        AnnotationPipeline(served).options(style="")


def draws_without_blank(trainer: Trainer, epoch: int) -> np.ndarray:
    """The windows ``epoch`` draws with no blank style (the same trainer, the share 0)."""
    share, windows = trainer.config.blank_style, trainer.windows
    trainer.config.blank_style, trainer.windows = 0.0, windows[: trainer.n_styled]
    try:
        return trainer.epoch_windows(epoch)
    finally:
        trainer.config.blank_style, trainer.windows = share, windows


@pytest.mark.parametrize("share", [1.0, -0.1])
def test_a_blank_style_is_a_share(corpora, share):
    with pytest.raises(ConfigError, match=r"blank_style: must be in \[0, 1\)"):
        TrainConfig(sources=sources(corpora), source_styles=True, blank_style=share)


def test_a_blank_style_without_styles_does_nothing_and_says_so(corpora, encoder, caplog):
    """Like source_styles on one corpus: nothing to leave blank (the API takes it, as its
    schema says; the run warns)."""
    cfg = TrainConfig(sources=sources(corpora), base_model=str(encoder), blank_style=0.5)
    with caplog.at_level("WARNING", logger="mslm_core.train"):
        trainer = Trainer(cfg, Path("/nonexistent/out"))
        trainer.prepare()
    assert "blank_style 0.5 does nothing" in caplog.text
    assert len(trainer.windows) == trainer.n_styled and "style" not in trainer.serving_manifest()
    assert np.array_equal(trainer.epoch_windows(0), np.arange(trainer.n_styled))


def test_a_sentence_is_cut_alike_whatever_style_it_is_read_as(encoder):
    from transformers import AutoTokenizer

    builder = WindowBuilder(AutoTokenizer.from_pretrained(str(encoder)), 16, styles=["fever"])
    words = ("pain in the liver after biopsy and fever " * 6).split()
    cuts = {
        style: [
            (w.word_start, w.word_end)
            for w in builder.prediction_windows([words], None, [style])[0]
        ]
        for style in ("", "fever")
    }
    assert len(cuts[""]) > 1 and cuts[""] == cuts["fever"]
    assert builder.body == 16 - len(builder.prefixes["fever"]) - len(builder.suffix)


def test_without_partial_labels_unannotated_words_are_o(corpora, encoder):
    cfg = TrainConfig(sources=sources(corpora), base_model=str(encoder), partial_labels=False)
    trainer = Trainer(cfg, Path("/nonexistent/out"))
    trainer.prepare()
    c = len(trainer.types)
    a_windows = [w for w, k in zip(trainer.windows, trainer.window_source, strict=True) if k == 0]
    outside = [w.allowed[p] for w in a_windows for p in np.nonzero(w.labels == 2)[0]]
    assert outside and all(set(np.nonzero(row)[0]) == {2 * c} for row in outside)
    # evaluation still judges A on its own types
    assert trainer.corpora["dev"].sentences[0].annotated == {"Drug", "Problem"}


def test_single_corpus_training_is_unchanged(toy_corpus, tiny_encoder):
    """No sources: no partial labels, windows as before."""
    trainer = Trainer(
        TrainConfig(train=str(toy_corpus), dev=str(toy_corpus), base_model=str(tiny_encoder)),
        Path("/x"),
    )
    trainer.prepare()
    assert all(w.allowed is None for w in trainer.windows)
    assert "allowed" not in trainer.collator(trainer.windows[:2], [np.random.default_rng(0)] * 2)
    assert trainer.corpora["train"].sentences[0].annotated is None
    assert read_corpus(toy_corpus).types == trainer.types


# -- the steps after prediction follow the clinical schema's types ------------------------------
def test_context_and_linking_apply_to_the_types_they_are_for(tmp_path):
    """Problem/Test/Procedure and Drug get an assertion; Dosage, Result and Anatomy none of
    their own (tied to a head, its: tests/test_relations.py); every entity its section.
    Dosage and Result (no MeSH branch) get no concept; the others do. A model with other
    types (BC5CDR's) gets both for every type, as before."""
    from mslm_core.context import ContextEngine, default_rules
    from mslm_core.linking import Linker, read_vocabulary
    from mslm_core.pipeline import AnnotationPipeline
    from mslm_core.types import Entity

    vocabulary = tmp_path / "v.tsv"
    vocabulary.write_text("D1\tfever\nD2\taspirin\nD3\tliver\nD4\t500 mg\n", "utf-8")
    linker = Linker(read_vocabulary(vocabulary), threshold=0.5)
    pipeline = AnnotationPipeline(None, ContextEngine(default_rules()), linker)  # type: ignore[arg-type]
    text = "No fever, no aspirin 500 mg, liver normal."

    def entity(word: str, kind: str) -> Entity:
        start = text.index(word)
        return Entity(start, start + len(word), word, kind, 0.9, 0.9, 1.0)

    ents = [
        entity("fever", "Problem"),
        entity("aspirin", "Drug"),
        entity("500 mg", "Dosage"),
        entity("liver", "Anatomy"),
        entity("normal", "Result"),
    ]
    out = {e.type: e for e in pipeline.postprocess([text], [ents])[0]}
    assert out["Problem"].assertion is not None and out["Problem"].assertion.negated
    assert all(out[t].assertion is None for t in ("Dosage", "Anatomy", "Result"))
    # a Drug's context: "no aspirin" is negated (the regimen with it, when tied)
    drug = out["Drug"].assertion
    assert drug is not None and drug.negated and drug.cues[0].text == "no"  # the nearest cue first
    assert out["Problem"].concept.id == "D1" and out["Anatomy"].concept.id == "D3"
    assert out["Drug"].concept.id == "D2"
    assert out["Dosage"].candidates is None and out["Result"].candidates is None  # not linked
    assert "concept" not in out["Dosage"].to_dict()
    assert [e.text for e in pipeline.postprocess([text], [ents])[0]] == [e.text for e in ents]
    old = [entity("fever", "Disease"), entity("aspirin", "Chemical")]
    both = pipeline.postprocess([text], [old])[0]
    assert all(e.assertion is not None and e.candidates is not None for e in both)
    # every type gets its section; a Drug its allergy
    note = "ALLERGIES: aspirin\nPLAN: liver panel, 500 mg"

    def at(word: str, kind: str) -> Entity:
        start = note.index(word)
        return Entity(start, start + len(word), word, kind, 0.9, 0.9, 1.0)

    got = pipeline.postprocess([note], [[at("aspirin", "Drug"), at("500 mg", "Dosage")]])[0]
    assert [e.section for e in got] == ["allergy", "observation_and_plan"]
    assert got[0].assertion.allergy and got[1].assertion is None


# -- the clinical benchmark's protocol on tiny corpora (benchmarks/clinical_model.py) ------------
@pytest.fixture
def tiny_clinical(corpora, monkeypatch):
    """The clinical benchmark's corpora: B as MACCROBAT2020 (weight 2), A as BC5CDR (0.5)."""
    from mslm_core.corpora import clinical

    tiny = [
        {
            "name": "MACCROBAT2020",
            "train": str(corpora["B"]),
            "dev": str(corpora["B"]),
            "test": str(corpora["B"]),
            "type_map": MAP_B,
            "weight": 2.0,
        },
        {
            "name": "BC5CDR-IOB",
            "train": str(corpora["A"]),
            "dev": str(corpora["A"]),
            "test": str(corpora["A"]),
            "type_map": MAP_A,
            "weight": 0.5,
        },
    ]
    monkeypatch.setattr(
        clinical,
        "sources",
        lambda cache, names, weights: [
            {**s, "weight": weights.get(s["name"], s["weight"])} for s in tiny if s["name"] in names
        ],
    )


def test_the_clinical_benchmark_runs_on_tiny_corpora(tiny_clinical, encoder, tmp_path, monkeypatch):
    """Every variant (merged, single, textbook) trains, scores each corpus on its own types,
    and the summary compares them per type — what docs/clinical-schema.md's table comes from."""
    import sys

    import clinical_model

    out = tmp_path / "results"
    argv = [
        "clinical_model.py",
        "--seeds",
        "1",
        "--corpora",
        "MACCROBAT2020",
        "BC5CDR-IOB",
        "--epochs",
        "1",
        "--base-model",
        str(encoder),
        "--out",
        str(out),
        "--work",
        str(tmp_path / "work"),
        "--weight",
        "BC5CDR-IOB=1",
    ]
    monkeypatch.setattr(sys, "argv", argv)
    clinical_model.main()
    runs = sorted(p.stem for p in (out / "runs").glob("*.json"))
    assert runs == [
        "merged-all-s1",
        "single-BC5CDR-IOB-s1",
        "single-MACCROBAT2020-s1",
        "textbook-BC5CDR-IOB-s1",
        "textbook-MACCROBAT2020-s1",
        "textbook-tuned-BC5CDR-IOB-s1",
        "textbook-tuned-MACCROBAT2020-s1",
    ]
    summary = json.loads((out / "summary.json").read_text())
    table = summary["table"]
    variants = {"merged", "single", "textbook", "textbook-tuned", "merged_minus_single", "paired"}
    assert set(table["BC5CDR-IOB"]) == variants
    # one seed: a difference, but no interval, so no verdict either way
    one = table["MACCROBAT2020"]["paired"]["single − textbook-tuned"]
    assert (one["seeds"], one["ci95"], one["verdict"]) == ([1], None, "unknown")
    # the tuned textbook: the learning rate and epoch choice its own dev search made
    # (benchmarks/results/textbook-lr), not the plain one's; each variant's cell its own runs
    tuned = json.loads((out / "runs" / "textbook-tuned-MACCROBAT2020-s1.json").read_text())
    plain = json.loads((out / "runs" / "textbook-MACCROBAT2020-s1.json").read_text())
    assert (tuned["settings"]["learning_rate"], plain["settings"]["learning_rate"]) == (3e-4, 1e-4)
    assert summary["textbook_tuned"]["select"] == "best-dev"
    f1 = {
        v: table["MACCROBAT2020"][v]["all"]["strict_f1"]["mean"]
        for v in ("textbook", "textbook-tuned")
    }
    assert f1 == {
        "textbook": round(100 * plain["test"]["MACCROBAT2020"]["strict"]["f1"], 2),
        "textbook-tuned": round(100 * tuned["test"]["MACCROBAT2020"]["strict"]["f1"], 2),
    }
    # each corpus judged on its own types: no Anatomy row for the chemical/disease corpus
    assert "Anatomy" not in table["BC5CDR-IOB"]["merged"]
    assert "Anatomy" in table["MACCROBAT2020"]["merged"]
    assert set(table["MACCROBAT2020"]["merged"]["Problem"]) >= {"strict_f1", "overlap_recall"}
    assert "| MACCROBAT2020 | Problem" in (out / "summary.md").read_text()
    merged = json.loads((out / "runs" / "merged-all-s1.json").read_text())
    assert set(merged["test"]) == {"MACCROBAT2020", "BC5CDR-IOB"}
    # --weight: the corpus sampled at another weight than the recipe's, and the run says so
    assert merged["weights"] == {"MACCROBAT2020": 2.0, "BC5CDR-IOB": 1.0}

    # a second seed of the merged run only (seeds are run a piece at a time): the table says
    # which cells hold fewer runs than it has seeds
    merged["seed"] = 2
    (out / "runs" / "merged-all-s2.json").write_text(json.dumps(merged))
    monkeypatch.setattr(sys, "argv", [*argv, "--aggregate-only"])
    clinical_model.main()
    summary = json.loads((out / "summary.json").read_text())
    assert summary["seeds"] == [1, 2]
    assert summary["table"]["MACCROBAT2020"]["merged"]["all"]["strict_f1"]["n"] == 2
    row = next(
        line
        for line in (out / "summary.md").read_text().splitlines()
        if line.startswith("| MACCROBAT2020 | all |")
    )
    merged_cell, single_cell = row.split(" | ")[2:4]
    assert "(n=" not in merged_cell and single_cell.endswith("(n=1)")


def test_the_clinical_benchmark_regroups_runs_recorded_with_linked_types_apart():
    """Runs recorded before Procedure, Test and Procedure|Test were one row are summarised as
    if they had been: the counts backed out of each row give what the metrics score now (the
    rows are those the sentences of test_types_a_listing_label_links_are_scored_as_one_row
    had then; Procedure had no prediction)."""
    import clinical_model

    def row(p, r, support, op, orec):
        def f1(a, b):
            return 2 * a * b / (a + b) if a + b else 0.0

        return {
            "precision": p,
            "recall": r,
            "f1": f1(p, r),
            "support": support,
            "overlap": {"precision": op, "recall": orec, "f1": f1(op, orec)},
        }

    recorded = {
        "Problem": row(1.0, 1.0, 1, 1.0, 1.0),
        "Procedure": row(0.0, 0.0, 1, 0.0, 0.0),
        "Procedure|Test": row(1.0, 0.5, 2, 1.0, 1.0),
        "Test": row(1 / 3, 1.0, 1, 2 / 3, 1.0),
    }
    got = clinical_model.regroup(recorded, n_pred=5)
    assert set(got) == {"Problem", "Procedure|Test"} and got["Problem"] is recorded["Problem"]
    linked = got["Procedure|Test"]
    assert linked["support"] == 4
    assert linked["precision"] == linked["recall"] == 0.5
    assert math.isclose(linked["overlap"]["precision"], 0.75)
    assert math.isclose(linked["overlap"]["recall"], 0.75)
    with pytest.raises(ValueError, match="Procedure: rows at precision 0"):
        clinical_model.regroup(recorded)  # without the total, Procedure's predictions are unknown
    assert clinical_model.regroup(got) is got  # rows already linked: as they are
    report = {"strict": {"f1": 0.6}, "overlap": {"f1": 0.8}, "per_type": recorded, "n_pred": 5}
    run = {"test": {"CHIA": report}, "variant": "merged", "corpus": None, "seed": 1}
    table = clinical_model.aggregate({"merged-all-s1": run}, ["CHIA"])
    assert table["CHIA"]["merged"]["Procedure|Test"]["strict_f1"]["mean"] == 50.0
    assert "| CHIA | Procedure\\|Test (4) | 50.0 ± 0.0 |" in clinical_model.markdown(table, 1)


def test_the_clinical_benchmark_says_ahead_only_where_the_paired_interval_excludes_zero():
    """The docs' "ahead", "level" and "behind" come from the summary: the paired difference of
    strict test F1 on the seeds both variants ran, and its 95 % interval (Student's t)."""
    import clinical_model

    def run(variant, corpus, seed, f1):
        return {
            "variant": variant,
            "corpus": corpus,
            "seed": seed,
            "test": {"CHIA": {"strict": {"f1": f1}}, "BC5CDR-IOB": {"strict": {"f1": f1 - 0.1}}},
        }

    runs = {}
    for seed, (merged, single, tuned) in enumerate(
        [(0.70, 0.71, 0.69), (0.72, 0.70, 0.685), (0.69, 0.705, 0.692)], start=1
    ):
        runs |= {
            f"merged-all-s{seed}": run("merged", None, seed, merged),
            f"single-CHIA-s{seed}": run("single", "CHIA", seed, single),
            f"textbook-tuned-CHIA-s{seed}": run("textbook-tuned", "CHIA", seed, tuned),
        }
    runs["textbook-tuned-CHIA-s4"] = run("textbook-tuned", "CHIA", 4, 0.5)  # no pair: unused
    got = clinical_model.paired(runs, "CHIA")
    assert set(got) == {"merged − single", "merged − textbook-tuned", "single − textbook-tuned"}
    ahead = got["single − textbook-tuned"]  # +2.0, +1.5, +1.3 points
    assert ahead["seeds"] == [1, 2, 3] and ahead["diff_mean"] == pytest.approx(1.6)
    low, high = ahead["ci95"]
    assert 0 < low < 1.6 < high and ahead["verdict"] == "ahead"
    assert got["merged − single"]["verdict"] == "level"  # −1.0, +2.0, −1.5: the interval spans 0
    flipped = {
        k: {**r, "test": {"CHIA": {"strict": {"f1": 1 - r["test"]["CHIA"]["strict"]["f1"]}}}}
        for k, r in runs.items()
    }
    assert clinical_model.paired(flipped, "CHIA")["single − textbook-tuned"]["verdict"] == "behind"
    # a merged run scores every corpus; the single runs here are CHIA's, so BC5CDR has no pair
    assert clinical_model.paired(runs, "BC5CDR-IOB") == {}
    table = {"CHIA": {"paired": got}}  # as aggregate() stores them (run above on tiny corpora)
    assert "| CHIA | single − textbook-tuned | 1, 2, 3 | +1.6 |" in clinical_model.markdown(
        table, 3
    )


def test_the_clinical_benchmark_scores_a_blank_style_as_served_too(
    tiny_clinical, tmp_path, monkeypatch
):
    """With ``--blank-style`` the merged run records test read as each corpus's own (the
    table) and as the bundle reads text by default, with no style (``test_served``)."""
    import sys

    import clinical_model

    vocab = {w.lower() for row in A + B for w in row["text"].split()} | {"maccrobat2020"}
    enc = build_tiny_encoder(tmp_path / "enc", sorted(vocab | {"bc5cdr-iob"}))
    out = tmp_path / "results"
    argv = ["clinical_model.py", "--seeds", "1", "--variants", "merged", "--epochs", "1"]
    argv += ["--corpora", "MACCROBAT2020", "BC5CDR-IOB", "--base-model", str(enc)]
    argv += ["--source-styles", "--blank-style", "0.5", "--keep-bundles"]
    argv += ["--out", str(out), "--work", str(tmp_path / "work")]
    monkeypatch.setattr(sys, "argv", argv)
    clinical_model.main()
    run = json.loads((out / "runs" / "merged-all-s1.json").read_text())
    assert run["config"]["blank_style"] == 0.5 and run["config"]["source_styles"]
    assert set(run["test_served"]) == set(run["test"]) == {"MACCROBAT2020", "BC5CDR-IOB"}
    served = run["test_served"]["MACCROBAT2020"]
    assert set(served) >= {"strict", "per_type"} and served["strict"] != {}
    manifest = json.loads((Path(run["bundle"]) / "manifest.json").read_text())
    assert manifest["style"] == ""


def test_the_clinical_benchmark_refuses_a_weight_it_cannot_use():
    import clinical_model

    assert clinical_model.weights(["CHIA=0.25"]) == {"CHIA": 0.25}
    for bad in ("CHIA", "CHIA=0", "CHIA=-1", "CHIA=x", "i2b2=1"):
        with pytest.raises(SystemExit, match="expected CORPUS=W"):
            clinical_model.weights([bad])


def test_a_run_that_would_train_no_step_is_refused(corpora, encoder, tmp_path):
    """Issue 58 item 14 (and 60): dataset weights of 1e-300 made a job that trained 0 steps
    and "succeeded". A configuration whose epochs draw no training window is a ConfigError
    before anything is trained."""
    cfg = TrainConfig(
        sources=sources(corpora, A=1e-300, B=1e-300),
        base_model=str(encoder),
        strategy="vanilla",
        epochs=1,
        batch_size=4,
    )
    with pytest.raises(ConfigError, match="trains no step"):
        Trainer(cfg, tmp_path / "bundle").prepare()  # what fit() does first
    assert not (tmp_path / "bundle").exists()
