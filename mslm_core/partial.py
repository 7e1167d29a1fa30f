"""Partial labels: the tags a word may take when its corpus does not annotate every type.

A job that trains on several corpora maps each onto one target schema (``typemap``). A corpus
annotates only some of the schema's types: BC5CDR marks chemicals and diseases, so a word it
leaves ``O`` may still be a body site or a test. Learning those words as ``O`` would teach the
model that the drugs, tests and organs the other corpora mark are nothing. Instead each word
gets the *set* of tags it may take, and the loss is the negative log of the probability mass
the model puts on that set (the marginal likelihood of the partial label; Jie et al. 2019
call it the partial CRF objective, here per word):

    O word of a corpus that leaves types U unannotated:  {O} ∪ {B-u, I-u : u ∈ U}
    first word of a mention of type t:                    {B-t}
    other words of it:                                    {I-t}
    a mention whose label lists several types S:          {B-s} / {I-s}, s ∈ S
    … that may also be no entity (``O`` in S):            the above ∪ the O word's set

With one tag allowed the loss is the usual cross-entropy, so a fully annotated corpus trains
exactly as before.

Tags are the linear head's (``model.typed_tags``): B-type c at c, I-type c at C + c, O at 2C.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from typing import TYPE_CHECKING

import numpy as np
import numpy.typing as npt

from .typemap import OUTSIDE, label_set
from .types import Mention

if TYPE_CHECKING:
    from torch import Tensor


def n_tags(n_types: int) -> int:
    return 2 * n_types + 1


def outside_row(n_types: int, unannotated: Collection[int]) -> npt.NDArray[np.bool_]:
    """The tags an unannotated (``O``) word may take: O, and B/I of the types its corpus
    leaves unannotated."""
    row = np.zeros(n_tags(n_types), bool)
    row[2 * n_types] = True
    for u in unannotated:
        row[u] = row[n_types + u] = True
    return row


def word_allowed(
    n_words: int,
    mentions: Sequence[Mention],
    type_ids: Mapping[str, int],
    unannotated: Collection[int],
) -> npt.NDArray[np.bool_]:
    """[n_words, 2C + 1] bool: the tags each word of a sentence may take. Mention labels may
    list several types (``"Procedure|Test"``, ``"O|Result"``; see ``typemap``)."""
    c = len(type_ids)
    outside = outside_row(c, unannotated)
    out = np.tile(outside, (n_words, 1))
    for m in mentions:
        members = label_set(m.label)
        ids = [type_ids[t] for t in sorted(members - {OUTSIDE})]
        for j in range(m.start, m.end):
            row = outside.copy() if OUTSIDE in members else np.zeros_like(outside)
            for t in ids:
                row[t if j == m.start else c + t] = True
            out[j] = row
    return out


def partial_label_loss(tag_logp: Tensor, allowed: Tensor, positions: Tensor) -> Tensor:
    """Mean over ``positions`` of −log Σ_{allowed} p(tag).

    ``tag_logp``: [B, T, L] log-probabilities of the tags; ``allowed``: [B, T, L] bool;
    ``positions``: [B, T] bool, the words scored (first subwords). 0 when none is scored."""
    import torch

    if not bool(positions.any()):
        return tag_logp.sum() * 0.0
    masked = tag_logp.masked_fill(~allowed, float("-inf"))
    nll = -torch.logsumexp(masked, dim=-1)  # [B, T]
    return nll[positions].mean()
