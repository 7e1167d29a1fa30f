"""Shared fixtures: tiny random encoders (built offline in a temp dir) and small corpora."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from mslm_core.train import Callback

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
# the packaged MeSH vocabulary costs seconds per service start (its index is built once per
# artifact store): tests that link ask for a vocabulary themselves
os.environ.setdefault("MSLM_VOCABULARY", "none")

DATA = Path(__file__).resolve().parents[2] / "shared" / "data"
#: Set by .ci/run where the shared corpora are on the machine: a test that needs one and finds
#: it missing fails (:func:`missing_data`) rather than skipping in silence.
REQUIRE_DATA = os.environ.get("MSLM_REQUIRE_DATA") == "1"

# A few sentences in the corpora's own format (IOB2), enough to overfit.
TOY_CONLL = """\
The\tO
patient\tO
has\tO
breast\tB-Disease
cancer\tI-Disease
.\tO

Aspirin\tB-Chemical
reduces\tO
fever\tB-Disease
.\tO

No\tO
sign\tO
of\tO
diabetes\tB-Disease
or\tO
cancer\tB-Disease
today\tO
.\tO

Cisplatin\tB-Chemical
caused\tO
renal\tB-Disease
failure\tI-Disease
in\tO
the\tO
patient\tO
.\tO
"""


def missing_data(what: str) -> None:
    """A test's data is not here: skip, or fail where it must be (:data:`REQUIRE_DATA`)."""
    if REQUIRE_DATA:
        pytest.fail(f"{what} (MSLM_REQUIRE_DATA=1: CI found the shared corpora at {DATA})")
    pytest.skip(what)


def data_dir(name: str) -> Path:
    path = DATA / name
    if not path.is_dir():
        missing_data(f"shared corpus {name} not found at {path}")
    return path


def build_tiny_encoder(
    directory: Path, words: list[str], hidden: int = 32, mlm_head: bool = True
) -> Path:
    """A 2-layer random BERT with a word-level vocabulary, saved like a hub checkpoint;
    ``mlm_head=False`` saves the bare encoder (as MiniLM ships)."""
    from transformers import BertConfig, BertForMaskedLM, BertModel, BertTokenizerFast

    vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *sorted({w.lower() for w in words})]
    directory.mkdir(parents=True, exist_ok=True)
    tokenizer = BertTokenizerFast(vocab={w: i for i, w in enumerate(vocab)}, do_lower_case=True)
    tokenizer.save_pretrained(str(directory))
    config = BertConfig(
        vocab_size=len(vocab),
        hidden_size=hidden,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=2 * hidden,
        max_position_embeddings=512,
    )
    import torch

    torch.manual_seed(0)
    (BertForMaskedLM if mlm_head else BertModel)(config).save_pretrained(str(directory))
    return directory


@pytest.fixture(scope="session")
def toy_corpus(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("toy") / "toy.tsv"
    path.write_text(TOY_CONLL, encoding="utf-8")
    return path


@pytest.fixture(scope="session")
def tiny_encoder(tmp_path_factory) -> Path:
    words = [line.split("\t")[0] for line in TOY_CONLL.splitlines() if line.strip()]
    extra = [
        "a",
        "an",
        "and",
        "the",
        "of",
        "in",
        "with",
        "no",
        "patient",
        "patients",
        "disease",
        "was",
        "were",
        "is",
    ]
    return build_tiny_encoder(tmp_path_factory.mktemp("enc") / "tiny-bert", words + extra)


@pytest.fixture(scope="session")
def tiny_encoder_without_mlm_head(tmp_path_factory) -> Path:
    words = [line.split("\t")[0] for line in TOY_CONLL.splitlines() if line.strip()]
    return build_tiny_encoder(tmp_path_factory.mktemp("enc") / "tiny-bare", words, mlm_head=False)


@pytest.fixture(scope="session")
def toy_bundle(toy_corpus, tiny_encoder, tmp_path_factory) -> Path:
    """A bundle of the tiny encoder trained to find the toy corpus's Chemical and Disease
    mentions (windows forced on longer inputs: max_length 16). Shared: copy it to change it."""
    from mslm_core.config import TrainConfig
    from mslm_core.train import train

    out = tmp_path_factory.mktemp("bundles") / "toy"
    cfg = TrainConfig(
        train=str(toy_corpus),
        dev=str(toy_corpus),
        base_model=str(tiny_encoder),
        epochs=30,
        batch_size=2,
        learning_rate=3e-3,
        warmup_ratio=0.0,
        patience=None,
        max_length=16,
        seed=3,
        strategy="vanilla",
    )
    train(cfg, out)
    return out


@pytest.fixture(scope="session")
def toy_onnx_bundle(toy_bundle, tmp_path_factory) -> Path:
    """:func:`toy_bundle` with its ONNX export (fp32), for what serves it with ONNX Runtime.
    Shared: copy it to change it."""
    import shutil

    from mslm_core.export import export_bundle

    out = tmp_path_factory.mktemp("bundles") / "toy-onnx"
    shutil.copytree(toy_bundle, out)
    export_bundle(out)
    return out


def toy_config(toy_corpus, encoder, **kw):
    """A config that overfits the toy corpus (train = dev = test) in a few seconds."""
    from mslm_core.config import TrainConfig

    base = dict(
        train=str(toy_corpus),
        dev=str(toy_corpus),
        test=str(toy_corpus),
        base_model=str(encoder),
        epochs=30,
        batch_size=2,
        learning_rate=3e-3,
        warmup_ratio=0.0,
        patience=None,
        seed=7,
    )
    return TrainConfig(**{**base, **kw})


class StopAt(Callback):
    """Cancels the training run at global step ``step``, as a user's cancel would."""

    def __init__(self, step: int):
        self.step = step

    def on_step_end(self, run):
        if run.state.global_step == self.step:
            run.state.should_stop = True
            run.state.stop_reason = "cancelled"


def torch_predictor(path, **kwargs):
    """The engine's PyTorch predictor for a bundle (what a bundle without ONNX serves)."""
    from mslm_core.inference import EntityExtractor

    return EntityExtractor.from_bundle(path, backend="torch", device="cpu", **kwargs).predictor


@pytest.fixture()
def record(request):
    """Reliability scenarios report what they measured: ``record(done=..., measured=...,
    result=...)``. With ``MSLM_RELIABILITY_OUT`` set (benchmarks/reliability.py sets it) each
    record is appended there as a JSON line, for docs/reliability.md."""
    import json
    import time

    def _record(scenario: str, done: str, measured: dict, result: str) -> None:
        out = os.environ.get("MSLM_RELIABILITY_OUT")
        if not out:
            return
        line = {
            "test": request.node.nodeid,
            "scenario": scenario,
            "done": done,
            "measured": measured,
            "result": result,
            "at": time.time(),
        }
        with open(out, "a", encoding="utf-8") as fh:
            fh.write(json.dumps(line) + "\n")

    return _record
