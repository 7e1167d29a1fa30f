"""Where a clinical model's strict F1 goes on each source corpus (issue 28): every gold mention
of a corpus's held-out test documents (its types mapped onto the clinical schema) is

- **found** — the same span with the same type (either, for a gold label that lists two);
- **the other annotated type** — the same span, another type this corpus annotates;
- **a type this corpus does not annotate** — the same span typed as the schema types it and
  the corpus does not (BC5CDR's analytes such as glucose are Tests in a case report), which
  strict F1 counts as a miss;
- **overlapping span** — found with other boundaries (the overlap F1 counts it);
- **nothing** — no predicted span touches it;

and every predicted mention of a type the corpus annotates that touches no gold mention is
**spurious** (the corpus's annotators did not mark it). Counts only: no corpus text is written.
A model trained with source styles (``--source-styles``) reads each corpus as its own.

    python benchmarks/clinical_misses.py --model BUNDLE [--corpora …] [--cache DIR]
        [--name clinical/misses]
"""

from __future__ import annotations

import argparse
import os
from collections import Counter
from pathlib import Path
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

from common import emit

from mslm_core.config import TrainConfig
from mslm_core.corpora import clinical
from mslm_core.evaluate import predict_mentions
from mslm_core.inference import EntityExtractor
from mslm_core.sources import load_training_data

KINDS = (
    "found",
    "the other annotated type",
    "a type this corpus does not annotate",
    "overlapping span",
    "nothing",
)


def breakdown(predictor: Any, source: dict[str, Any]) -> dict[str, Any]:
    """The gold mentions of ``source``'s test split by what became of them, and the spurious
    predictions (see the module's docstring)."""
    data = load_training_data(TrainConfig(sources=[{**source, "weight": 1.0}]))
    test = data.sources[0].splits["test"]
    # a model trained with source styles reads each corpus as its own (as its study scored it)
    own = source["name"] in predictor.builder.styles
    read_as = source["name"] if own else predictor.style
    predicted = predict_mentions(predictor, test, [read_as] * len(test.sentences) if own else None)
    kinds: Counter[str] = Counter({k: 0 for k in KINDS})
    retyped: Counter[str] = Counter()
    spurious = predictions = 0
    for sentence, mentions in zip(test.sentences, predicted, strict=True):
        annotated = set(sentence.annotated or {m.label for m in sentence.mentions})
        by_span = {(m.start, m.end): m.label for m in mentions}
        gold = [(m.start, m.end) for m in sentence.mentions]
        for m in sentence.mentions:
            got = by_span.get((m.start, m.end))
            if got is not None and got in m.label.split("|"):  # CHIA's Procedure|Test: either
                kinds["found"] += 1
            elif got in annotated:
                kinds["the other annotated type"] += 1
            elif got is not None:
                kinds["a type this corpus does not annotate"] += 1
                retyped[f"{m.label} → {got}"] += 1
            elif any(a < m.end and m.start < b for a, b in by_span):
                kinds["overlapping span"] += 1
            else:
                kinds["nothing"] += 1
        for m in mentions:
            if m.label in annotated:
                predictions += 1
                spurious += not any(a < m.end and m.start < b for a, b in gold)
    total = sum(kinds.values())
    return {
        "read_as": read_as or None,
        "gold_mentions": total,
        "share": {k: round(100 * v / total, 1) if total else None for k, v in kinds.items()},
        "counts": dict(kinds),
        "retyped": dict(retyped.most_common()),
        "predictions_of_annotated_types": predictions,
        "spurious_share": round(100 * spurious / predictions, 1) if predictions else None,
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", required=True, help="a bundle (the clinical model)")
    ap.add_argument(
        "--corpora", nargs="+", choices=clinical.CORPORA, default=list(clinical.CORPORA)
    )
    ap.add_argument("--cache", help="corpus cache (default: MSLM_CORPUS_CACHE or ~/.cache/mslm)")
    ap.add_argument("--name", default="clinical/misses", help="results/NAME.json")
    args = ap.parse_args()
    predictor = EntityExtractor.from_bundle(args.model, backend="torch").predictor
    corpora = {
        s["name"]: breakdown(predictor, s)
        for s in clinical.sources(args.cache, tuple(args.corpora))
    }
    emit(
        args.name,
        {
            c: {"found": r["share"]["found"], **{k: r["share"][k] for k in KINDS[1:]}}
            | {"spurious": r["spurious_share"]}
            for c, r in corpora.items()
        },
        {"corpora": corpora, "model": Path(args.model).name},
    )


if __name__ == "__main__":
    main()
