"""The optional re-rank of a linker's candidates by an encoder's embeddings.

TF-IDF finds the nearest names by their characters; the encoder (MiniLM by default: a
sentence-similarity model) knows that "kidney failure" and "renal insufficiency" mean the same.
A prepared folder holds the encoder as one ONNX graph that returns mean-pooled, L2-normalised
embeddings, its ``tokenizer.json``, every name's embedding (float16, in the index's name order)
and the weight. Serving reads it with ONNX Runtime and ``tokenizers`` only (no torch: the API
image); preparing it (:func:`prepare`) exports the encoder, so it needs torch.

A candidate's score becomes ``(tfidf + weight · cos) / (1 + weight)``, ``cos`` the best cosine
between the mention and the concept's names (below 0 counts as 0); an exact name still
scores 1, and nothing else reaches it."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt

from .linker import POOL, LinkerIndex, name_pairs

if TYPE_CHECKING:
    from .vocabulary import Vocabulary

ENCODER_ONNX, TOKENIZER = "encoder.onnx", "tokenizer.json"
NAMES, CONFIG = "names.npy", "rerank.json"
#: The best of 1, 2, 4, 8, 16 and 32 by accuracy@1 over the development mentions of
#: NCBI-disease and BC5CDR together, with the packaged vocabulary (benchmarks/linking.py
#: --rerank-grid, results/linking/rerank-dev.json): a flat grid, 0.863 to 0.864 everywhere.
DEFAULT_WEIGHT = 2.0
MAX_TOKENS = 32
BATCH = 64


class Embedder:
    """Mean-pooled, normalised embeddings from a prepared folder's ONNX encoder."""

    def __init__(self, folder: str | os.PathLike[str], threads: int = 0):
        import onnxruntime as ort
        from tokenizers import Tokenizer

        src = Path(folder)
        options = ort.SessionOptions()
        options.intra_op_num_threads = threads
        self.session = ort.InferenceSession(
            str(src / ENCODER_ONNX), options, providers=["CPUExecutionProvider"]
        )
        self.tokenizer = Tokenizer.from_file(str(src / TOKENIZER))
        self.tokenizer.enable_truncation(MAX_TOKENS)
        self.tokenizer.enable_padding()
        self.inputs = {i.name for i in self.session.get_inputs()}

    def __call__(self, texts: list[str]) -> npt.NDArray[np.float32]:
        out: list[npt.NDArray[np.float32]] = []
        for start in range(0, len(texts), BATCH):
            encoded = self.tokenizer.encode_batch(texts[start : start + BATCH])
            feed = {
                "input_ids": np.array([e.ids for e in encoded], dtype=np.int64),
                "attention_mask": np.array([e.attention_mask for e in encoded], dtype=np.int64),
            }
            if "token_type_ids" in self.inputs:
                feed["token_type_ids"] = np.zeros_like(feed["input_ids"])
            out.append(self.session.run(["embedding"], feed)[0])
        if not out:
            return np.zeros((0, 0), dtype=np.float32)
        return np.concatenate(out).astype(np.float32)


class Reranker:
    """Re-ranks candidate concepts of an index by the prepared folder's embeddings."""

    def __init__(self, folder: str | os.PathLike[str], index: LinkerIndex, threads: int = 0):
        src = Path(folder)
        config = json.loads((src / CONFIG).read_text(encoding="utf-8"))
        self.weight = float(config["weight"])
        self.names = np.load(src / NAMES, allow_pickle=False)
        if self.names.shape[0] != len(index.name_concept):
            raise ValueError(
                f"{src}: {self.names.shape[0]} name embeddings for {len(index.name_concept)} names"
            )
        self.embed = Embedder(src, threads)
        order = np.argsort(index.name_concept, kind="stable")
        bounds = np.searchsorted(index.name_concept[order], np.arange(len(index.ids) + 1))
        self._rows = [order[bounds[c] : bounds[c + 1]] for c in range(len(index.ids))]
        self.encoder = str(config.get("encoder", ""))

    def scores(
        self, queries: list[str], pools: list[list[tuple[int, float]]]
    ) -> list[list[tuple[int, float]]]:
        """``pools``: per query, (concept, TF-IDF score) pairs; returns them re-scored and
        sorted best first."""
        vectors = self.embed(queries) if queries else np.zeros((0, 0), np.float32)
        out = []
        for vector, pool in zip(vectors, pools, strict=True):
            rescored = []
            for concept, score in pool:
                if score >= 1.0:  # an exact name stays exact
                    rescored.append((concept, 1.0))
                    continue
                cos = float((self.names[self._rows[concept]].astype(np.float32) @ vector).max())
                combined = (score + self.weight * max(cos, 0.0)) / (1.0 + self.weight)
                rescored.append((concept, min(combined, 0.9999)))
            out.append(sorted(rescored, key=lambda cs: -cs[1]))
        return out


def export_encoder(encoder: str, folder: str | os.PathLike[str]) -> None:
    """Write ``encoder`` (an alias such as ``minilm``, a path or a hub id) as one ONNX graph
    that returns mean-pooled, normalised embeddings, and its ``tokenizer.json``. Needs torch
    and transformers."""
    import warnings

    import torch
    from transformers import AutoModel, AutoTokenizer

    from ..model import resolve_encoder, split_revision

    # an alias or a local path; a hub id only as NAME@REVISION pins it (HF_HUB_OFFLINE=1 in
    # every process of ours)
    path, revision = split_revision(resolve_encoder(encoder))
    model = AutoModel.from_pretrained(path, revision=revision, attn_implementation="eager")
    model.eval()
    tokenizer = AutoTokenizer.from_pretrained(path, revision=revision)

    class Pooled(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.model = model

        def forward(self, input_ids: Any, attention_mask: Any) -> Any:
            hidden = self.model(input_ids=input_ids, attention_mask=attention_mask)[0]
            mask = attention_mask.unsqueeze(-1).to(hidden.dtype)
            pooled = (hidden * mask).sum(1) / mask.sum(1).clamp(min=1e-9)
            return torch.nn.functional.normalize(pooled, dim=-1)

    out = Path(folder)
    out.mkdir(parents=True, exist_ok=True)
    ids = torch.ones((2, 8), dtype=torch.int64)
    axes = {0: "batch", 1: "sequence"}
    with warnings.catch_warnings(), torch.no_grad():
        warnings.simplefilter("ignore")
        torch.onnx.export(
            Pooled(),
            (ids, torch.ones_like(ids)),
            str(out / ENCODER_ONNX),
            dynamo=False,
            opset_version=17,
            input_names=["input_ids", "attention_mask"],
            output_names=["embedding"],
            dynamic_axes={"input_ids": axes, "attention_mask": axes, "embedding": {0: "batch"}},
        )
    tokenizer.backend_tokenizer.save(str(out / TOKENIZER))


def prepare(
    vocabulary: Vocabulary,
    index: LinkerIndex,
    folder: str | os.PathLike[str],
    encoder: str = "minilm",
    weight: float = DEFAULT_WEIGHT,
) -> None:
    """Make ``folder`` a re-rank for ``index`` (built from ``vocabulary``): the encoder's
    graph, and every name embedded in the index's order."""
    out = Path(folder)
    export_encoder(encoder, out)
    names = [name for _, name in name_pairs(vocabulary)]
    if len(names) != len(index.name_concept):
        raise ValueError("the index was not built from this vocabulary")
    vectors = Embedder(out)(names).astype(np.float16)
    np.save(out / NAMES, vectors, allow_pickle=False)
    config = {"encoder": encoder, "weight": weight, "names": len(names), "pool": POOL}
    (out / CONFIG).write_text(json.dumps(config), encoding="utf-8")
