"""The clinical schema and the corpora its first model is trained on (docs/clinical-schema.md).

Target types: Problem (diseases, disorders, signs, symptoms, conditions), Drug, Dosage, Test
(diagnostic procedures, lab tests, measurements), Result (lab values and test results),
Procedure (therapeutic) and Anatomy. Four openly licensed corpora, each fetched at a pinned
commit (``pinned``), are mapped onto it; a type a corpus does not annotate is left to the
partial-label loss (``mslm_core.partial``), never taught as ``O``.

:func:`prepare` turns a corpus into a dataset folder (``train``/``dev``/``test`` files) that
``mslm train``, a dataset upload and the first start all read: the BLURB IOB files as they
are, the brat corpora as JSONL of the types the schema keeps, split by document at the fixed
split recorded in ``data/splits.json``.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..errors import ConfigError
from .brat import brat_documents, document_records
from .pinned import DATA, default_cache, fetch_corpus, get_corpus

SCHEMA = "clinical-v1"
PREPARED = "prepared"


@dataclass(frozen=True)
class ClinicalSource:
    """One corpus of the clinical recipe: its type map onto the schema (docs/clinical-schema.md
    says why each type goes where it goes) and its sampling weight per epoch. ``brat``: the
    folder of its brat documents inside the corpus (None: BLURB IOB splits in ``iob``)."""

    corpus: str
    type_map: dict[str, Any]
    weight: float
    brat: str | None = None
    iob: str | None = None

    @property
    def kept_types(self) -> list[str]:
        """The source types the map keeps (brat corpora are prepared with these only)."""
        return sorted(t for t, target in self.type_map.items() if target is not None)


# MACCROBAT2020's modifiers of a drug's regimen and of a finding, which its MODIFY relations
# tie to their heads (mslm_core.relations): Administration is the route ("orally",
# "intravenous"), the others are named as they are
MACCROBAT_MODIFIERS = {
    "Administration": "Route",
    "Frequency": "Frequency",
    "Duration": "Duration",
    "Severity": "Severity",
}

RECIPE: tuple[ClinicalSource, ...] = (
    ClinicalSource(
        "MACCROBAT2020",
        {
            "Sign_symptom": "Problem",
            "Disease_disorder": "Problem",
            "Medication": "Drug",
            "Dosage": "Dosage",
            "Diagnostic_procedure": "Test",
            "Lab_value": "Result",
            "Therapeutic_procedure": "Procedure",
            "Biological_structure": "Anatomy",
            **MACCROBAT_MODIFIERS,
        },
        weight=2.0,  # the only corpus of case reports, and of Dosage, Result and Anatomy
        brat="MACCROBAT2020",
    ),
    ClinicalSource(
        "CHIA",
        {
            "Condition": "Problem",
            "Drug": "Drug",
            "Measurement": "Test",
            # CHIA's procedures are diagnostic ("MRI", "biopsy") and therapeutic ("surgery",
            # "chemotherapy") alike: either, the corpus does not say which
            "Procedure": ["Procedure", "Test"],
            "Device": "Procedure",
        },
        weight=1.0,
        brat="chia_with_scope",
    ),
    ClinicalSource(
        "BC5CDR-IOB",
        {"Chemical": "Drug", "Disease": "Problem"},
        weight=0.5,
        iob="data/BC5CDR-IOB",
    ),
    ClinicalSource(
        "NCBI-disease-IOB",
        {"Disease": "Problem"},
        weight=0.5,
        iob="data/NCBI-disease-IOB",
    ),
)
CORPORA = tuple(s.corpus for s in RECIPE)
# The recipe's training settings over the defaults: the strategy its figures were measured
# with (benchmarks/results/clinical, first-start.json), the default until the learning curve
# made it ``auto``; ``auto`` on this recipe is not measured yet (docs/clinical-schema.md).
# Each choice is argued from dev figures and the first start's bound (benchmarks/
# recipe_decisions.py, docs/clinical-schema.md "The recipe's decisions, from dev figures"): not
# source styles (their dev figures read each corpus in its own style, which a service reading
# notes cannot ask for); not the PubMed corpora at weight 1 nor 5 epochs (better on dev, but
# their work would take the first start past 35 minutes on 2 CPU cores). A third of the
# training sentences are rewritten as clinicians write notes (shorthand, no articles, no
# closing full stop, cases, bullets; mslm_core.notestyle): on the note-style check set's
# development notes it read a little more of the notes' shorthand, and on the source
# corpora's dev documents it is level (docs/notes.md).
SETTINGS: dict[str, Any] = {"strategy": "mslm_tapt", "note_style": 0.3}
# The first start's early model, over SETTINGS: served within minutes of `mslm up`, then
# replaced by the full recipe's (store: Job.replaces). One epoch of plain fine-tuning on the
# first 1,000 training sentences of each corpus, judged on the first 200 dev and test
# sentences of each: on 2 CPU cores about 3 minutes from the job's start to its ONNX export
# (benchmarks/results/clinical/first-start.json, `minutes_to_early`; its quality on the
# clinical test documents: docs/clinical-schema.md, "The first start").
EARLY_SETTINGS: dict[str, Any] = {
    "strategy": "vanilla",
    "epochs": 1,
    "max_train_sentences": 1000,
    "max_eval_sentences": 200,
}


def recipe_source(corpus: str) -> ClinicalSource:
    for source in RECIPE:
        if source.corpus == corpus:
            return source
    raise ConfigError(f"{corpus!r} is not a corpus of the clinical recipe ({', '.join(CORPORA)})")


def splits() -> dict[str, Any]:
    """The fixed document-level splits of the brat corpora (``data/splits.json``)."""
    table: dict[str, Any] = json.loads((DATA / "splits.json").read_text(encoding="utf-8"))
    return table


def _unit(corpus: str, document: str) -> str:
    """What a split assigns: a MACCROBAT document, a CHIA trial (its _inc and _exc files)."""
    return document.rsplit("_", 1)[0] if corpus == "CHIA" else document


def _fingerprint(source: ClinicalSource) -> str:
    spec = {
        "schema": SCHEMA,
        "corpus": get_corpus(source.corpus).commit,
        "kept": source.kept_types,
        "splits": splits().get(source.corpus),
        "version": 2,  # the conversion (brat.document_records; 2: with relations)
    }
    return hashlib.sha256(json.dumps(spec, sort_keys=True).encode()).hexdigest()[:16]


def prepare(corpus: str, cache: str | Path | None = None, **fetch: Any) -> Path:
    """The dataset folder of ``corpus`` for the clinical recipe — ``train``, ``dev`` and
    ``test`` files with the corpus's own types — fetched (``fetch`` goes to
    :func:`~mslm_core.corpora.pinned.fetch_corpus`) and converted if needed."""
    source = recipe_source(corpus)
    where = Path(cache) if cache is not None else default_cache()
    root = fetch_corpus(corpus, where, **fetch)
    if source.iob is not None:
        return root / source.iob
    if source.brat is None:
        raise ConfigError(f"{corpus}: the recipe names neither its IOB nor its brat folder")
    target = where / PREPARED / SCHEMA / corpus
    stamp = target / "prepared.json"
    fingerprint = _fingerprint(source)
    if stamp.exists() and json.loads(stamp.read_text(encoding="utf-8")).get("fingerprint") == (
        fingerprint
    ):
        return target
    assigned = {
        unit: split for split in ("train", "dev", "test") for unit in splits()[corpus][split]
    }
    records: dict[str, list[dict[str, Any]]] = {"train": [], "dev": [], "test": []}
    counts: Counter[str] = Counter()
    documents: Counter[str] = Counter()
    for doc in brat_documents(root / source.brat):
        split = assigned.get(_unit(corpus, doc.name))
        if split is None:
            raise ConfigError(f"{corpus}: document {doc.name} is in no split of splits.json")
        rows, counted = document_records(doc, source.kept_types)
        records[split].extend(rows)
        counts.update(counted)
        documents[split] += 1
    target.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{corpus}-", dir=target.parent))
    try:
        for split, rows in records.items():
            with open(staging / f"{split}.jsonl", "w", encoding="utf-8") as fh:
                for row in rows:
                    fh.write(json.dumps(row, ensure_ascii=False) + "\n")
        summary = {
            "fingerprint": fingerprint,
            "schema": SCHEMA,
            "corpus": corpus,
            "commit": get_corpus(corpus).commit,
            "kept_types": source.kept_types,
            "documents": dict(documents),
            "sentences": {split: len(rows) for split, rows in records.items()},
            "entities": dict(counts),
        }
        (staging / "prepared.json").write_text(json.dumps(summary, indent=2) + "\n")
        shutil.rmtree(target, ignore_errors=True)
        os.replace(staging, target)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    return target


def dataset_files(folder: Path) -> dict[str, Path]:
    """A prepared folder's split files: train, dev, test."""
    from ..corpus import split_paths

    return split_paths(folder)


def sources(
    cache: str | Path | None = None,
    corpora: tuple[str, ...] = CORPORA,
    weights: dict[str, float] | None = None,
    **fetch: Any,
) -> list[dict[str, Any]]:
    """The ``sources`` of a TrainConfig that trains the clinical model (``mslm train
    --recipe clinical``), from the corpus cache (fetched where it lacks them)."""
    out = []
    for corpus in corpora:
        source = recipe_source(corpus)
        files = dataset_files(prepare(corpus, cache, **fetch))
        out.append(
            {
                "name": corpus,
                "train": str(files["train"]),
                "dev": str(files["dev"]) if "dev" in files else None,
                "test": str(files["test"]) if "test" in files else None,
                "type_map": source.type_map,
                "weight": (weights or {}).get(corpus, source.weight),
            }
        )
    return out


def missing(cache: str | Path | None = None) -> list[str]:
    """The recipe's corpora the cache does not hold yet."""
    where = Path(cache) if cache is not None else default_cache()
    return [c for c in CORPORA if not get_corpus(c).cached(where)]
