"""Training configuration: one dataclass, validated, saved in the bundle manifest.

One JSON file of this config reproduces a run exactly (``TrainConfig.from_json``).
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass, field, fields, replace
from pathlib import Path
from typing import Any

from .errors import ConfigError
from .weights import WEIGHT_RULES

# The default peak learning rate by encoder width (TrainConfig.learning_rate_for).
# MiniLM (384 wide): the rate within 0.1 dev points of the best on NCBI-disease, the lower one
# (benchmarks/results/quality-ablation, docs/quality.md; tests/test_docs.py checks it)
SMALL_ENCODER_LR = 2e-4
BASE_ENCODER_LR = 5e-5  # the paper's, for 768-wide BERTs
HEAD_CHOICES = ("linear", "paper")  # model.HEADS (not imported: serving needs no torch)
DECODINGS = ("viterbi", "argmax")
SELECTIONS = ("best-dev", "last")
BELOW_FLOOR = ("warn", "fail")


@dataclass(frozen=True)
class Strategy:
    """A training strategy: which masking chooses positions (a name in masking.py's
    registry, the same word as the strategy; None: no masking), whether the masked-LM loss
    is mask-specific weighted, and whether the masked LM trains alone first (``tapt_epochs``
    of it, heads off) before ordinary fine-tuning without masking."""

    masking: str | None
    weighted: bool = False
    two_stage: bool = False


STRATEGIES: dict[str, Strategy] = {
    "vanilla": Strategy(None),
    "mslm": Strategy("mslm", weighted=True),
    "span": Strategy("span"),
    "pmi": Strategy("pmi"),
    "random": Strategy("random"),
    # task-adaptive pre-training with MSLM's weighted ELM-BLM masked LM, then fine-tuning
    "mslm_tapt": Strategy("mslm", weighted=True, two_stage=True),
}
# Settings whose default depends on the strategy: two-stage MSLM takes the study's ELM rate
# (its grid's best cell by dev) and warms a new MLM head up; the others keep the paper's.
STRATEGY_DEFAULTS: dict[str, dict[str, Any]] = {
    "mslm_tapt": {"elm_rate": 0.25, "mlm_head_warmup_steps": 200},
}
BASE_DEFAULTS: dict[str, Any] = {"elm_rate": 1.0, "mlm_head_warmup_steps": 0, "epochs": 3}


@dataclass(frozen=True)
class SizeRule:
    """One step of the ``auto`` strategy: a training set of up to ``up_to_sentences``
    sentences (None: any larger one) trains as the learning curve's ``variant``, whose
    ``settings`` these are; ``decided_at``: the curve's sizes at which that variant won."""

    up_to_sentences: int | None
    variant: str
    settings: dict[str, Any]
    decided_at: tuple[int, ...]


AUTO = "auto"
# ``auto``: the strategy (and epochs) by the number of training sentences, as the learning
# curve decided them on dev (benchmarks/results/mslm-curve: the best variant at each size, the
# cheapest of those tied with it; a switch at the geometric mean of two neighbouring sizes).
# tests/test_bench.py holds this table to the committed decision; the last step reaches past
# the largest size decided so far.
AUTO_BY_SIZE: tuple[SizeRule, ...] = (
    SizeRule(158, "vanilla", {"strategy": "vanilla"}, (100,)),
    SizeRule(
        None, "vanilla-4-epochs", {"strategy": "vanilla", "epochs": 4}, (250, 500, 1000, 2000)
    ),
)
STRATEGY_CHOICES: tuple[str, ...] = (*STRATEGIES, AUTO)
# The default: the learning curve's choice (benchmarks/results/mslm-curve; docs/benchmarks.md,
# "Does MSLM help?"): its winner changes with the training set's size, so ``auto``. Runs that
# name ``mslm_tapt`` (the protocols' ``default`` variants, the clinical recipe) keep it.
DEFAULT_STRATEGY = AUTO


def auto_rule(sentences: int) -> SizeRule:
    """The step of ``auto`` that a training set of this many sentences falls in."""
    return next(
        r for r in AUTO_BY_SIZE if r.up_to_sentences is None or sentences <= r.up_to_sentences
    )


@dataclass(frozen=True)
class Bounds:
    """The range a number may take (None: no bound on that side)."""

    ge: float | None = None
    gt: float | None = None
    le: float | None = None
    lt: float | None = None

    def problem(self, value: float) -> str | None:
        """What is wrong with ``value`` (``must be in [0, 1]``), or None."""
        ge, gt, le, lt = self.ge, self.gt, self.le, self.lt
        if (
            (ge is None or value >= ge)
            and (gt is None or value > gt)
            and (le is None or value <= le)
            and (lt is None or value < lt)
        ):
            return None
        n = _number
        low = f"[{n(ge)}" if ge is not None else f"({n(gt)}" if gt is not None else None
        high = f"{n(le)}]" if le is not None else f"{n(lt)})" if lt is not None else None
        if low and high:
            return f"must be in {low}, {high}"
        if low:
            return f"must be at least {n(ge)}" if ge is not None else f"must be above {n(gt)}"
        return f"must be at most {n(le)}" if le is not None else f"must be below {n(lt)}"


def _number(value: float | None) -> str:
    return str(int(value)) if value is not None and float(value).is_integer() else f"{value:g}"


def _f(
    default: Any, help: str, *, job: bool = False, bounds: Bounds | None = None, **kw: Any
) -> Any:
    """A setting: ``help`` says what it does; ``job``: it is a fine-tuning job's option over
    HTTP (``JOB_OPTIONS``: the store's allow-list and the API's ``JobCreate`` follow);
    ``bounds``: its range, checked by :meth:`TrainConfig.validate` and stated in the API's
    schema."""
    meta = {"help": help, "job": job, "bounds": bounds, **kw}
    if isinstance(default, (list, dict)):
        return field(default_factory=lambda: type(default)(default), metadata=meta)
    return field(default=default, metadata=meta)


#: The settings that take one of a few words (the API's schema lists them: tests/test_reliability)
CHOICES: dict[str, tuple[str, ...]] = {
    "masking": ("dynamic", "static"),
    "mask_replace": ("mask", "bert"),
    "weight_rule": WEIGHT_RULES,
    "detect_on": ("masked", "clean"),
    "head": HEAD_CHOICES,
    "decoding": DECODINGS,
    "select": SELECTIONS,
    "below_floor": BELOW_FLOOR,
    "device": ("auto", "cpu", "cuda"),
}


@dataclass
class TrainConfig:
    train: str = _f("", "training corpus (CoNLL-IOB or JSONL)")
    dev: str = _f("", "development corpus: model selection and early stopping")
    test: str | None = _f(None, "optional test corpus, evaluated once with the best model")
    sources: list[dict[str, Any]] = field(
        default_factory=list,
        metadata={
            "help": "several corpora on one target schema, instead of train/dev/test: a "
            "list of {name, train, dev, test, type_map, weight} (docs/clinical-schema.md)"
        },
    )
    partial_labels: bool = _f(
        True,
        "sources: a word a corpus leaves O may still be any type that corpus does not "
        "annotate (partial-label loss); off, it is taken as O",
        job=True,
    )
    source_styles: bool = _f(
        False,
        "sources: each corpus's windows open with its name, so that the model learns each "
        "one's conventions (where its annotators draw a mention's edges, what they leave "
        "out); the bundle reads text as the first corpus's",
        job=True,
    )
    blank_style: float = _f(
        0.0,
        "source_styles: this share of every corpus's windows, drawn anew each epoch, opens "
        "with no name, and the bundle reads text with none (the blend of all the corpora) "
        "unless asked for a corpus's style; without styles (source_styles off, or one "
        "corpus) there is nothing to leave blank and it does nothing",
        job=True,
        bounds=Bounds(ge=0, lt=1),
    )
    note_style: float = _f(
        0.0,
        "this share of the training sentences is rewritten the way clinicians write notes — "
        "clinical shorthand for long forms (SOB, HTN, h/o), no articles, no closing full stop, "
        "upper or lower case, a list bullet — every gold mention carried over exactly "
        "(mslm_core.notestyle; docs/notes.md)",
        job=True,
        bounds=Bounds(ge=0, le=1),
    )
    base_model: str = _f("minilm", "encoder: alias (minilm), local path or hub id", job=True)
    strategy: str = _f(
        DEFAULT_STRATEGY,
        "one of: " + ", ".join(STRATEGY_CHOICES) + " (auto: by the number of training "
        "sentences, as the learning curve decided; docs/benchmarks.md, 'Does MSLM help?')",
        job=True,
    )
    head: str = _f(
        "linear",
        "linear: one linear layer over B-TYPE/I-TYPE/O tags (transformers' token "
        "classification); paper: MSLM's detection head and pooled type classifier",
        job=True,
    )
    decoding: str = _f(
        "viterbi",
        "viterbi: the most probable tag path in which no I follows O; argmax: each word's "
        "best tag, an I after O starting a mention",
        job=True,
    )
    select: str = _f(
        "best-dev", "best-dev: the epoch with the best dev F1; last: the last one", job=True
    )
    elm_rate: float = _f(
        None,
        "share of mentions masked per sentence (ceil rule); by strategy: 0.25 for mslm_tapt, "
        "1.0 (the paper's) otherwise",
        job=True,
        bounds=Bounds(ge=0, le=1),
    )
    blm_rate: float = _f(
        0.075, "probability of masking each other token", job=True, bounds=Bounds(ge=0, le=1)
    )
    mask_rate: float | None = _f(
        None,
        "budget of span/pmi/random masking; default: the share MSLM masks on train",
        bounds=Bounds(gt=0, le=1),
        job=True,
    )
    masking: str = _f("dynamic", "dynamic (re-drawn per batch, seeded) or static", job=True)
    mask_replace: str = _f("mask", "mask (all [MASK]) or bert (80/10/10)", job=True)
    mask_weights: bool = _f(
        True, "mask-specific weights; False fixes both to 1 (ablation)", job=True
    )
    weight_rule: str = _f(
        "paper", "paper (eq. 2-5) or reference (the research code's rule)", job=True
    )
    detect_on: str = _f(
        "masked", "masked: heads read the masked pass; clean: a second pass", job=True
    )
    detect_ignore_masked: bool = _f(False, "detection loss skips masked positions", job=True)
    mlm_weight: float = _f(
        1.0, "λ: weight of the MLM loss in the joint loss", bounds=Bounds(ge=0, le=100), job=True
    )
    tapt_epochs: int = _f(
        1,
        "mslm_tapt: epochs of masked-LM-only training before fine-tuning",
        bounds=Bounds(ge=0, le=200),
        job=True,
    )
    mlm_head_warmup_steps: int = _f(
        None,
        "steps training only a newly initialised MLM head, encoder frozen, before training; "
        "by strategy: 200 for mslm_tapt, 0 otherwise",
        bounds=Bounds(ge=0, le=100_000),
        job=True,
    )
    mlm_head_warmup_lr: float = _f(
        1e-3,
        "learning rate of the MLM head warm-up",
        bounds=Bounds(gt=0, le=1),
        job=True,
    )
    epochs: int = _f(
        None,
        "training epochs (fine-tuning; mslm_tapt adds its masked-LM epochs); by strategy: 3, "
        "or as auto chooses",
        job=True,
        bounds=Bounds(ge=1, le=200),
    )
    batch_size: int = _f(
        16, "sentences (windows) per batch", job=True, bounds=Bounds(ge=1, le=1024)
    )
    learning_rate: float | None = _f(
        None,
        "peak learning rate (AdamW); by default 2e-4 for encoders narrower than 512 (MiniLM: "
        "the issue-16 ablation) and 5e-5 (the paper's) for base-size and larger ones",
        job=True,
        bounds=Bounds(gt=0, le=1),
    )
    weight_decay: float = _f(0.01, "AdamW weight decay", bounds=Bounds(ge=0, le=1), job=True)
    warmup_ratio: float = _f(
        0.1, "share of steps of linear warm-up", bounds=Bounds(ge=0, lt=1), job=True
    )
    max_grad_norm: float = _f(1.0, "gradient clipping", bounds=Bounds(gt=0), job=True)
    max_length: int = _f(
        128,
        "subwords per window; longer sentences are split",
        job=True,
        bounds=Bounds(ge=16, le=8192),
    )
    pack: bool = _f(
        False,
        "pack consecutive sentences into one window (up to max_length subwords) so each is "
        "read with its neighbours; prediction packs a text's sentences alike",
        job=True,
    )
    dropout: float = _f(0.1, "dropout in the heads", bounds=Bounds(ge=0, lt=1), job=True)
    seed: int = _f(
        42,
        "seed of everything: order, masks, initialisation",
        job=True,
        bounds=Bounds(ge=0, le=2**32 - 1),  # numpy's and torch's seeds are unsigned 32-bit
    )
    max_train_sentences: int | None = _f(
        None,
        "use only the first K training sentences (of each dataset)",
        job=True,
        bounds=Bounds(ge=1),
    )
    max_eval_sentences: int | None = _f(
        None,
        "score only the first K dev and test sentences (of each dataset): a quicker run "
        "(the first start's early model), judged on fewer sentences",
        job=True,
        bounds=Bounds(ge=1),
    )
    min_dev_f1: float = _f(
        0.0,
        "the model's floor: below this dev F1 (the macro F1 over the corpora of a run on "
        "several), or predicting no entity on dev at all, it is flagged (below_floor) and is "
        "served only when an admin forces it",
        job=True,
        bounds=Bounds(ge=0, le=1),
    )
    below_floor: str = _f(
        "warn",
        "a model below min_dev_f1: warn (the job succeeds with the warning) or fail (the job "
        "fails with it and keeps no model)",
        job=True,
    )
    patience: int | None = _f(
        3,
        "stop after this many epochs without dev F1 gain (0: never; best-dev selection only)",
        job=True,
        bounds=Bounds(ge=0),
    )
    eval_batch_size: int = _f(
        64, "windows per batch at evaluation", bounds=Bounds(ge=1, le=4096), job=True
    )
    checkpoint_every: int = _f(0, "also checkpoint every N steps (0: at epoch ends only)")
    device: str = _f("auto", "auto, cpu or cuda")

    def __post_init__(self) -> None:
        if self.strategy in STRATEGIES:  # else validate() says what is wrong
            for name, value in {
                **BASE_DEFAULTS,
                **STRATEGY_DEFAULTS.get(self.strategy, {}),
            }.items():
                if getattr(self, name) is None:
                    setattr(self, name, value)
        self.validate()

    def validate(self) -> None:
        def bad(name: str, why: str) -> ConfigError:
            return ConfigError(f"{name}: {why} (got {getattr(self, name)!r})")

        if self.strategy not in STRATEGY_CHOICES:
            raise bad("strategy", "must be one of " + ", ".join(STRATEGY_CHOICES))
        if self.sources:
            from .sources import parse_sources  # no torch: the API validates jobs with it

            if self.train or self.dev or self.test:
                raise ConfigError("give either train/dev/test or sources, not both")
            parse_sources(self.sources)
        for f in fields(self):
            bounds, value = f.metadata.get("bounds"), getattr(self, f.name)
            if bounds is not None and value is not None:
                problem = bounds.problem(value)
                if problem:
                    raise bad(f.name, problem)
        for name, valid in CHOICES.items():
            if getattr(self, name) not in valid:
                raise bad(name, "must be one of " + ", ".join(valid))
        if self.strategy == AUTO:
            return  # checked again once resolved (resolve_auto)
        joint = self.joint
        masked_detection = joint.masking == "mslm" and not joint.two_stage
        if self.detect_ignore_masked and masked_detection and self.elm_rate >= 1.0:
            raise bad(
                "detect_ignore_masked",
                "needs elm_rate < 1: with every mention masked no entity token is left to learn",
            )

    def resolve_auto(self, sentences: int) -> tuple[TrainConfig, dict[str, Any] | None]:
        """This config as it trains on ``sentences`` training sentences: with ``auto``, the
        strategy and the settings of the learning curve's choice for that size (a setting
        given explicitly is kept), and the record of that choice for the manifest; any
        other strategy: unchanged, None."""
        if self.strategy != AUTO:
            return self, None
        rule = auto_rule(sentences)
        given = {k: getattr(self, k) for k in rule.settings if k != "strategy"}
        kept = {k: v for k, v in given.items() if v is not None}
        chosen = {k: v for k, v in rule.settings.items() if k not in kept}
        resolved = replace(self, **chosen)
        sizes = ", ".join(f"{n:,}" for n in rule.decided_at)
        bound = (
            f"up to {rule.up_to_sentences:,}"
            if rule.up_to_sentences is not None
            else f"more than {max(r.up_to_sentences or 0 for r in AUTO_BY_SIZE):,}"
        )
        why = (
            f"{sentences:,} training sentences: {rule.variant}, the learning curve's choice for "
            f"{bound} sentences (best on dev, or the cheapest tied with the best, at {sizes})"
        )
        if kept:
            why += "; kept as given: " + ", ".join(f"{k}={v}" for k, v in kept.items())
        record = {
            "train_sentences": sentences,
            "variant": rule.variant,
            "settings": chosen,
            "kept": kept,
            "why": why,
            "rules": [asdict(r) for r in AUTO_BY_SIZE],
        }
        return resolved, record

    def learning_rate_for(self, hidden_size: int) -> float:
        """The peak learning rate for an encoder of this width: the one set, or the default
        (small encoders such as MiniLM learn best with a larger rate in a few epochs; the
        paper's 5e-5 is for BERT-base)."""
        if self.learning_rate is not None:
            return self.learning_rate
        return SMALL_ENCODER_LR if hidden_size < 512 else BASE_ENCODER_LR

    @property
    def joint(self) -> Strategy:
        """What the strategy trains; ``auto`` must be resolved first."""
        if self.strategy == AUTO:
            raise ConfigError("strategy auto: resolve it by the training set's size first")
        return STRATEGIES[self.strategy]

    @property
    def masking_strategy(self) -> str | None:
        return self.joint.masking

    @property
    def mlm_epochs(self) -> int:
        """Leading epochs of masked-LM-only training (two-stage strategies)."""
        return self.tapt_epochs if self.joint.two_stage else 0

    @property
    def total_epochs(self) -> int:
        return self.mlm_epochs + self.epochs

    @property
    def weighted(self) -> bool:
        return self.joint.weighted and self.mask_weights

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def fingerprint(self) -> str:
        """Identifies what a checkpoint was trained with (device excluded)."""
        after = ("device", "eval_batch_size", "min_dev_f1", "below_floor")  # weights alike
        d = {k: v for k, v in self.to_dict().items() if k not in after}
        return hashlib.sha256(json.dumps(d, sort_keys=True).encode()).hexdigest()[:16]

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> TrainConfig:
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(data) - known)
        if unknown:
            raise ConfigError(f"unknown config field(s): {', '.join(unknown)}")
        return cls(**data)

    @classmethod
    def from_json(cls, path: str | Path) -> TrainConfig:
        try:
            data = json.loads(Path(path).read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            raise ConfigError(f"{path}: cannot read config: {exc}") from exc
        return cls.from_dict(data)

    @classmethod
    def help(cls) -> dict[str, str]:
        return {f.name: f.metadata.get("help", "") for f in fields(cls)}


#: The options of a fine-tuning job over HTTP, declared by their fields above (``job=True``):
#: the store's allow-list is this tuple and the API's ``JobCreate`` is built from the fields'
#: types, help and bounds (the client's ``JobParams`` is kept equal by a test).
JOB_OPTIONS: tuple[str, ...] = tuple(f.name for f in fields(TrainConfig) if f.metadata.get("job"))
