"""Clinical context (ConText) against openly licensed corpora with negation labels.

    python benchmarks/assertion.py [--model [NAME=]BUNDLE] [--split all|test] [--baselines]
        [--cache DIR] [--git CORPUS=DIR …]

MACCROBAT2020 (case reports; POLARITY of events) and CHIA (trial eligibility criteria;
Negation and Mood linked to entities) are fetched at pinned commits with pinned sha256 into
``--cache`` (default ``~/.cache/mslm/corpora``; ``--*-git``: read them from a local clone when
GitHub is out of reach). Never committed.

1. **Gold spans**: every gold entity goes through the engine; precision/recall/F1 of
   ``negated`` (and of ``possible``: MACCROBAT's UNCERTAIN/MAYBE_*, CHIA's Mood, against our
   possible-or-hypothetical) — our rules (ConText) beside a NegEx-only baseline: the same
   negation triggers, without pseudo-triggers, terminators or the other categories.
2. **Predicted spans** (``--model [NAME=]BUNDLE``, repeatable): the served engine (entities +
   context) on the raw documents; predicted entities of the finding and drug types (the
   clinical schema's Problem and Drug; every type of a model without them, such as BC5CDR's
   Chemical and Disease) are matched to gold findings and medications (overlap); the share of
   gold findings found, end-to-end precision/recall of negated findings, and negated on
   matched pairs. ``--split test``: on the held-out documents of the clinical model's split
   only (mslm_core/corpora/data/splits.json), the fair ground for a model trained on the others.

3. **Side by side** (``--baselines``): ours, medspaCy 1.3.1 (its ConText and sectionizer) and
   negspacy 1.1.0 (NegEx, its clinical termset) on the same gold findings, each attribute a
   corpus labels — negated; possible-or-hypothetical (MACCROBAT's UNCERTAIN/MAYBE_*, CHIA's
   Mood); historical (MACCROBAT: a finding inside a History span; CHIA: a Has_temporal such as
   "history", "previous", "prior"); family (MACCROBAT: inside a Family_history span) — with
   95 % intervals from 1,000 bootstrap resamples of the documents, and the time per finding.
   The baselines run in virtual environments of their own under ``.mslm/bench/venvs`` (made
   on first use from PyPI: medspaCy needs spaCy < 3.8, negspacy spaCy >= 3.8), through
   ``benchmarks/context_baselines.py``.

   BioScope's clinical part (1,954 radiology reports, negation and speculation cues and scopes;
   its words restored from the CMC 2007 challenge's reports: ``harness.context_corpora``) is
   scored the same way, every content word of a report a span: negated inside a negation
   scope, possible inside a speculation scope; and, with ``--model``, on the findings each
   model finds in the reports (negated or possible as their last word is in a scope).

4. **Sections** (with ``--baselines``): our sectionizer and medspaCy's on MTSamples' 4,966
   transcribed notes (CC0; their headers put back on lines of their own): the share of the
   notes' header lines each recognises as a section, and P/R/F1 of the sections that set an
   attribute (family history, past medical and surgical history, allergies) against what the
   header's own words name.

Every corpus is fetched at a pinned commit with pinned sha256 into the cache; ``--git
CORPUS=DIR`` reads one from a local clone. Writes
``benchmarks/results/assertion/summary.json``; the last line printed is its headline.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

from common import RESULTS, machine

from harness.clinical import (
    DEFAULT_CACHE,
    GoldDocument,
    GoldEntity,
    chia_gold,
    corpora,
    fetch_corpus,
    maccrobat_gold,
)
from harness.context_corpora import (
    ATTRIBUTE_SECTIONS,
    BIOSCOPE_FILE,
    CMC_FILES,
    MTSAMPLES_FILE,
    bioscope_findings,
    bioscope_gold,
    mtsamples_notes,
    score_sections,
)
from mslm_core.context import ContextEngine, default_rules, rules_for
from mslm_core.types import ASSERTION_ATTRIBUTES, Entity

# gold types a disease/chemical model (BC5CDR) can find, per corpus
MODEL_TYPES = {
    "MACCROBAT2020": {"Sign_symptom", "Disease_disorder", "Medication"},
    "CHIA": {"Condition", "Drug"},
}
FINDINGS = {
    "MACCROBAT2020": {"Sign_symptom", "Disease_disorder"},
    "CHIA": {"Condition"},
    "BioScope": {"Word"},  # every content word of a radiology report (harness.context_corpora)
}
# the pinned corpora each benchmark corpus is made of (mslm_core.corpora)
SOURCES = {
    "MACCROBAT2020": ("MACCROBAT2020",),
    "CHIA": ("CHIA",),
    "BioScope": ("BioScope-clinical-anon", "CMC2007"),
}


def prf(tp: int, fp: int, fn: int) -> dict:
    p = tp / (tp + fp) if tp + fp else 0.0
    r = tp / (tp + fn) if tp + fn else 0.0
    f = 2 * p * r / (p + r) if p + r else 0.0
    return {
        "precision": round(p, 4),
        "recall": round(r, 4),
        "f1": round(f, 4),
        "tp": tp,
        "fp": fp,
        "fn": fn,
    }


def score(pairs: list[tuple[bool, bool]]) -> dict:
    """(gold, predicted) booleans → P/R/F1 of the positive class."""
    tp = sum(g and p for g, p in pairs)
    fp = sum(p and not g for g, p in pairs)
    fn = sum(g and not p for g, p in pairs)
    return {**prf(tp, fp, fn), "gold_positive": tp + fn, "n": len(pairs)}


def gold_spans(docs: list[GoldDocument], engine: ContextEngine, types: set[str] | None = None):
    """(gold negated, predicted negated), (gold possible, predicted possible|hypothetical)."""
    neg, pos = [], []
    seconds = 0.0
    for d in docs:
        gold = [g for g in d.entities if types is None or g.type in types]
        ents = [
            Entity(g.start, g.end, d.text[g.start : g.end], g.type, 1.0, 1.0, 1.0) for g in gold
        ]
        t0 = time.perf_counter()
        out = engine.apply(d.text, ents)
        seconds += time.perf_counter() - t0
        for g, e in zip(gold, out, strict=True):
            a = e.assertion
            neg.append((g.negated, a.negated))
            pos.append((g.possible, a.possible or a.hypothetical))
    return neg, pos, seconds


# the predicted types that stand for gold findings and medications, when the model has them
CLINICAL_MATCHED = {"Problem", "Drug"}


def predicted_spans(
    name: str, docs: list[GoldDocument], extractor, style: str | None = None
) -> dict:
    """End to end: the model's entities with their context, against gold findings.
    ``style``: read the documents as this corpus's (a model trained with source styles)."""
    types = MODEL_TYPES[name]
    known = set(extractor.info.types)
    considered = known & CLINICAL_MATCHED or known
    findings = FINDINGS[name]
    n_pred = matched_pred = 0
    findings_total = findings_found = 0
    gold_total = gold_found = 0
    e2e_tp_pred = e2e_pred_neg = 0
    gold_neg = gold_neg_found = 0
    on_matched: list[tuple[bool, bool]] = []
    t0 = time.perf_counter()
    results = extractor([d.text for d in docs], extractor.options(style=style))
    seconds = time.perf_counter() - t0
    for d, predicted in zip(docs, results, strict=True):
        gold = [g for g in d.entities if g.type in types]
        gold_total += len(gold)
        gold_neg += sum(g.negated for g in gold)
        hit_gold: set[int] = set()
        neg_hit_gold: set[int] = set()
        for e in predicted:
            if e.type not in considered:
                continue
            n_pred += 1
            overlapping = [i for i, g in enumerate(gold) if g.start < e.end and e.start < g.end]
            negated = bool(e.assertion and e.assertion.negated)
            e2e_pred_neg += negated
            if overlapping:
                matched_pred += 1
                hit_gold.update(overlapping)
                g_neg = any(gold[i].negated for i in overlapping)
                on_matched.append((g_neg, negated))
                if negated and g_neg:
                    e2e_tp_pred += 1
                    neg_hit_gold.update(i for i in overlapping if gold[i].negated)
        gold_found += len(hit_gold)
        gold_neg_found += len(neg_hit_gold)
        is_finding = [i for i, g in enumerate(gold) if g.type in findings]
        findings_total += len(is_finding)
        findings_found += sum(i in hit_gold for i in is_finding)
    p = e2e_tp_pred / e2e_pred_neg if e2e_pred_neg else 0.0
    r = gold_neg_found / gold_neg if gold_neg else 0.0
    return {
        "gold_types": sorted(types),
        "predicted_types": sorted(considered),
        "findings_recall": round(findings_found / findings_total, 4) if findings_total else 0.0,
        "gold_findings": findings_total,
        "predicted_entities": n_pred,
        "predicted_matching_gold": matched_pred,
        "gold_entities": gold_total,
        "gold_entities_found": gold_found,
        "negated_end_to_end": {
            "precision": round(p, 4),
            "recall": round(r, 4),
            "f1": round(2 * p * r / (p + r), 4) if p + r else 0.0,
            "predicted_negated": e2e_pred_neg,
            "gold_negated": gold_neg,
        },
        "negated_on_matched_spans": score(on_matched),
        "annotate_seconds": round(seconds, 2),
    }


# -- side by side with medspaCy and negspacy ----------------------------------------------------
REPO = Path(__file__).resolve().parents[1]
BASELINES = {"medspacy": "medspacy==1.3.1", "negspacy": "negspacy==1.1.0"}
SIDE_ATTRIBUTES = ("negated", "possible_or_hypothetical", "historical", "family")


def baseline_python(engine: str) -> Path:
    """The baseline's interpreter, its environment made on first use."""
    import subprocess

    venv = REPO / ".mslm" / "bench" / "venvs" / engine
    python = venv / "bin" / "python"
    if not python.exists():
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
        subprocess.run([str(python), "-m", "pip", "install", "-q", BASELINES[engine]], check=True)
    return python


def run_baseline(engine: str, docs: list[GoldDocument], types: set[str]) -> tuple[list, float]:
    """Per document, per gold entity of ``types``, what the baseline says of it; seconds."""
    import subprocess
    import tempfile

    python = baseline_python(engine)
    with tempfile.TemporaryDirectory() as tmp:
        src, dst = Path(tmp) / "in.json", Path(tmp) / "out.json"
        src.write_text(
            json.dumps(
                {
                    "documents": [
                        {
                            "text": d.text,
                            "spans": [[g.start, g.end] for g in d.entities if g.type in types],
                        }
                        for d in docs
                    ]
                }
            )
        )
        subprocess.run(
            [
                str(python),
                str(REPO / "benchmarks" / "context_baselines.py"),
                engine,
                str(src),
                str(dst),
            ],
            check=True,
        )
        out = json.loads(dst.read_text())
    return out["results"], out["seconds"]


def run_medspacy_sections(texts: list[str]) -> tuple[list, float]:
    """medspaCy's sectionizer on the texts: per text ``[start, end, category]``; seconds."""
    import subprocess
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        src, dst = Path(tmp) / "in.json", Path(tmp) / "out.json"
        src.write_text(json.dumps({"documents": [{"text": t} for t in texts]}))
        script = str(REPO / "benchmarks" / "context_baselines.py")
        python = str(baseline_python("medspacy"))
        subprocess.run([python, script, "medspacy-sections", str(src), str(dst)], check=True)
        out = json.loads(dst.read_text())
    return out["sections"], out["seconds"]


def sections_side_by_side(notes: list[tuple[str, str, str]], engine: ContextEngine) -> dict:
    """Our sectionizer and medspaCy's on the same notes (harness.context_corpora)."""
    assert engine.sectionizer is not None
    found, started = [], time.perf_counter()
    for _, _, text in notes:
        found.append(
            [[s.header_start, s.header_end, s.category] for s in engine.sectionizer.find(text)]
        )
    systems = {"ours": (found, time.perf_counter() - started)}
    systems["medspacy"] = run_medspacy_sections([t for _, _, t in notes])
    return score_sections(notes, systems)


def run_ours(
    engine: ContextEngine, docs: list[GoldDocument], types: set[str]
) -> tuple[list, float]:
    results, seconds = [], 0.0
    for d in docs:
        gold = [g for g in d.entities if g.type in types]
        ents = [
            Entity(g.start, g.end, d.text[g.start : g.end], g.type, 1.0, 1.0, 1.0) for g in gold
        ]
        t0 = time.perf_counter()
        out = engine.apply(d.text, ents)
        seconds += time.perf_counter() - t0
        results.append([{a: getattr(e.assertion, a) for a in ASSERTION_ATTRIBUTES} for e in out])
    return results, seconds


def _value(said: dict | None, attribute: str) -> bool | None:
    """What a system says of an attribute (None: the system has no such attribute)."""
    if said is None:
        return False  # a span the engine could not place (never in practice)
    if attribute == "possible_or_hypothetical":
        if "possible" not in said:
            return None
        return bool(said.get("possible") or said.get("hypothetical"))
    return bool(said[attribute]) if attribute in said else None


def _gold(g: GoldEntity, attribute: str) -> bool | None:
    return g.possible if attribute == "possible_or_hypothetical" else getattr(g, attribute)


def side_by_side(
    docs: list[GoldDocument], types: set[str], systems: dict[str, tuple[list, float]]
) -> dict:
    """Per attribute the corpus labels, per system: P/R/F1 with 95 % bootstrap intervals
    (documents resampled 1,000 times), and the time per finding."""
    import numpy as np

    golds = [[g for g in d.entities if g.type in types] for d in docs]
    n = sum(len(g) for g in golds)
    out: dict = {"findings": n, "documents": len(docs), "ms_per_finding": {}}
    for name, (_, seconds) in systems.items():
        out["ms_per_finding"][name] = round(1000 * seconds / max(1, n), 4)
    rng = np.random.default_rng(29)
    samples = [rng.integers(0, len(docs), len(docs)) for _ in range(1000)]
    for attribute in SIDE_ATTRIBUTES:
        if any(_gold(g, attribute) is None for gs in golds for g in gs):
            continue  # the corpus does not label it
        block: dict = {"gold_positive": sum(bool(_gold(g, attribute)) for gs in golds for g in gs)}
        if not block["gold_positive"]:
            continue  # nothing to find (MACCROBAT's test documents: no family history)
        for name, (results, _) in systems.items():
            # per document: tp, fp, fn
            counts = np.zeros((len(docs), 3), np.int64)
            said_any = False
            for k, (gs, said) in enumerate(zip(golds, results, strict=True)):
                for g, s in zip(gs, said, strict=True):
                    v = _value(s, attribute)
                    if v is None:
                        break
                    said_any = True
                    gv = bool(_gold(g, attribute))
                    counts[k] += (gv and v, v and not gv, gv and not v)
            if not said_any:
                continue

            def f1(c: np.ndarray) -> tuple[float, float, float]:
                tp, fp, fn = (int(x) for x in c)
                p = tp / (tp + fp) if tp + fp else 0.0
                r = tp / (tp + fn) if tp + fn else 0.0
                return p, r, (2 * p * r / (p + r) if p + r else 0.0)

            p, r, f = f1(counts.sum(0))
            boot = sorted(f1(counts[idx].sum(0))[2] for idx in samples)
            block[name] = {
                "precision": round(p, 4),
                "recall": round(r, 4),
                "f1": round(f, 4),
                "f1_95ci": [round(boot[25], 4), round(boot[974], 4)],
            }
        out[attribute] = block
    return out


#: The discharge-style check set (issue 55): sentences of our own, each finding written
#: ``[words]{attributes}``; a line and the list-item lines below it are one note.
CHECK_SET = Path(__file__).resolve().parent / "data" / "context-discharge.txt"
#: A second set in the same form, written by a helper that saw neither the rules nor the first
#: set, committed before the second round of issue 55's rules (see its header).
HELD_OUT_CHECK_SET = CHECK_SET.with_name("context-discharge-heldout.txt")
CHECK_ATTRIBUTES = ("negated", "possible", "hypothetical", "historical", "family")
_CODES = {"neg": "negated", "poss": "possible", "hyp": "hypothetical", "hist": "historical"}
_FINDING = re.compile(r"\[([^\]]+)\]\{([a-z,]*)\}")
_ITEM = re.compile(r"\s*(?:[-*]|\d{1,2}[.)])\s")


def check_set(path: Path = CHECK_SET) -> list[tuple[str, str, list[tuple[int, int, set[str]]]]]:
    """The check set's notes: (section, text, findings as (start, end, attributes))."""
    notes: list[tuple[str, str, list[tuple[int, int, set[str]]]]] = []
    section = ""
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if line.startswith("## "):
            section = line[3:].strip()
            continue
        if not line.strip() or line.startswith("#"):
            continue
        text, found, at = "", [], 0
        for m in _FINDING.finditer(line):
            text += line[at : m.start()]
            codes = {c for c in m.group(2).split(",") if c}
            unknown = codes - {*_CODES, "fam"}
            if unknown:
                raise SystemExit(f"{path}:{number}: unknown attribute(s) {sorted(unknown)}")
            attrs = {_CODES.get(c, "family") for c in codes}
            found.append((len(text), len(text) + len(m.group(1)), attrs))
            text += m.group(1)
            at = m.end()
        text += line[at:]
        if notes and _ITEM.match(line) and notes[-1][0] == section:
            _, prev, prev_found = notes[-1]
            shift = len(prev) + 1
            notes[-1] = (
                section,
                prev + "\n" + text,
                prev_found + [(a + shift, b + shift, s) for a, b, s in found],
            )
        else:
            notes.append((section, text, found))
    return notes


def score_check_set(systems: dict[str, list[list[dict]]], notes: list) -> dict:
    """Per system, per attribute: precision, recall and F1 over the check set's findings; and
    per section the F1 of each attribute it has."""
    out: dict = {}
    for name, said in systems.items():
        block: dict = {}
        for attribute in CHECK_ATTRIBUTES:
            rows = [
                (attribute in attrs, bool(s.get(attribute)))
                for (_, _, found), per in zip(notes, said, strict=True)
                for (_, _, attrs), s in zip(found, per, strict=True)
                if attribute in s
            ]
            if not rows or not any(g for g, _ in rows):
                continue
            tp = sum(g and s for g, s in rows)
            fp = sum(s and not g for g, s in rows)
            fn = sum(g and not s for g, s in rows)
            block[attribute] = prf(tp, fp, fn)
        out[name] = block
    return out


def discharge_check_set(baselines: bool, path: Path = CHECK_SET) -> dict:
    """Ours under each convention profile (and medspaCy with ``baselines``) on a check set's
    findings, each typed Problem."""
    from mslm_core.context import PROFILES

    notes = check_set(path)
    docs = [
        GoldDocument(
            f"{section}-{k}",
            text,
            [GoldEntity(a, b, "Finding", "negated" in s, "possible" in s) for a, b, s in found],
        )
        for k, (section, text, found) in enumerate(notes)
    ]
    systems: dict[str, list[list[dict]]] = {}
    for profile in PROFILES:
        engine = ContextEngine.configured(profile=profile)
        said = []
        for _, text, found in notes:
            ents = [Entity(a, b, text[a:b], "Problem", 1.0, 1.0, 1.0) for a, b, _ in found]
            out = engine.apply(text, ents)
            said.append([{a: getattr(e.assertion, a) for a in CHECK_ATTRIBUTES} for e in out])
        systems[f"ours ({profile})"] = said
    if baselines:
        systems["medspacy"] = run_baseline("medspacy", docs, {"Finding"})[0]
    counts = {
        a: sum(a in s for _, _, found in notes for _, _, s in found) for a in CHECK_ATTRIBUTES
    }
    return {
        "file": str(path.relative_to(REPO)),
        "notes": len(notes),
        "findings": sum(len(found) for _, _, found in notes),
        "gold_positive": counts,
        "sections": sorted({section for section, _, _ in notes}),
        "scores": score_check_set(systems, notes),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument(
        "--model",
        action="append",
        default=[],
        metavar="[NAME=]BUNDLE",
        help="a bundle: also score the served engine's own entities (repeatable)",
    )
    ap.add_argument(
        "--split",
        choices=["all", "test"],
        default="all",
        help="test: the clinical model's held-out documents only (splits.json)",
    )
    ap.add_argument("--cache", default=str(DEFAULT_CACHE))
    ap.add_argument("--maccrobat-git", help="a clone of Saieiei/NLP (no GitHub access)")
    ap.add_argument("--chia-git", help="a clone of Vidhate/CHIA-NER-RE (no GitHub access)")
    ap.add_argument(
        "--git",
        action="append",
        default=[],
        metavar="CORPUS=DIR",
        help="a clone of a pinned corpus's repository (BioScope-clinical-anon, CMC2007, "
        "MTSamples, …) when GitHub is out of reach (repeatable)",
    )
    ap.add_argument(
        "--baselines",
        action="store_true",
        help="also run medspaCy and negspacy on the same findings (side by side)",
    )
    ap.add_argument(
        "--own-styles",
        action="store_true",
        help="a model trained with source styles reads each corpus's documents in that "
        "corpus's style, when it has it (what a request's style asks for); default: the "
        "model's own",
    )
    ap.add_argument(
        "--out", help="default: results/assertion (results/assertion-test: --split test)"
    )
    args = ap.parse_args()

    clones = dict(spec.split("=", 1) for spec in args.git)
    clones.setdefault("MACCROBAT2020", args.maccrobat_git)
    clones.setdefault("CHIA", args.chia_git)

    def fetched(name: str) -> Path:
        return fetch_corpus(name, args.cache, clones.get(name))

    bioscope, restored = bioscope_gold(
        fetched("BioScope-clinical-anon") / BIOSCOPE_FILE,
        [fetched("CMC2007") / f for f in CMC_FILES],
    )
    corpora_docs = {
        "MACCROBAT2020": maccrobat_gold(fetched("MACCROBAT2020") / "MACCROBAT2020"),
        "CHIA": chia_gold(fetched("CHIA") / "chia_with_scope"),
        "BioScope": bioscope,
    }
    if args.split == "test":
        from mslm_core.corpora.clinical import splits

        held_out = {name: set(splits()[name]["test"]) for name in ("MACCROBAT2020", "CHIA")}
        corpora_docs = {
            name: [
                d
                for d in docs
                if d.name.rsplit("_", 1)[0] in held_out[name] or d.name in held_out[name]
            ]
            if name in held_out
            else docs  # BioScope: no model was trained on any of it
            for name, docs in corpora_docs.items()
        }
    rules = default_rules()
    systems = {
        "context": ContextEngine(rules),
        "negex": ContextEngine(
            rules.only(["NEGATED_EXISTENCE"], ["FORWARD", "BACKWARD", "BIDIRECTIONAL"])
        ),
    }
    site = (
        Path(__file__).resolve().parents[1] / "docs" / "examples" / "context-rules-eligibility.json"
    )
    eligibility = ContextEngine(rules_for(site, "extend"))
    from mslm_core.bundle import readable_styles
    from mslm_core.pipeline import AnnotationPipeline

    extractors = {}
    for spec in args.model:
        label, _, path = spec.rpartition("=")
        extractors[label or Path(path).name] = AnnotationPipeline.from_bundle(
            path, context=systems["context"]
        )
    out: dict = {"corpora": {}, "rules": {"count": len(rules), "origin": rules.origin}}
    for name, docs in corpora_docs.items():
        specs = [corpora()[source] for source in SOURCES[name]]
        entry: dict = {
            "source": " + ".join(f"github.com/{s.repository}@{s.commit[:12]}" for s in specs),
            "licence": "; ".join(s.licence for s in specs),
            "documents": len(docs),
            "gold_entities": sum(len(d.entities) for d in docs),
            "gold_spans": {},
        }
        for label, types in (("all", None), ("findings", FINDINGS[name])):
            block: dict = {"types": "all" if types is None else sorted(types)}
            for system, engine in systems.items():
                neg, pos, seconds = gold_spans(docs, engine, types)
                block[system] = {"negated": score(neg)}
                if system == "context":
                    block[system]["possible_or_hypothetical"] = score(pos)
                    block[system]["seconds"] = round(seconds, 3)
            entry["gold_spans"][label] = block
        if name == "CHIA":
            # a site's rules (docs/examples/context-rules-eligibility.json): exceptions negate
            for label, types in (("all", None), ("findings", FINDINGS[name])):
                neg, _, _ = gold_spans(docs, eligibility, types)
                entry["gold_spans"][label]["context_with_eligibility_site_rules"] = {
                    "negated": score(neg)
                }
        if name == "MACCROBAT2020" and args.split == "all":
            # the rules were checked against the even-numbered half of MACCROBAT (sorted by
            # file name); the odd half and CHIA were never looked at while writing them
            held_out = docs[1::2]
            block = {"documents": len(held_out), "types": sorted(FINDINGS[name])}
            for system, engine in systems.items():
                neg, pos, _ = gold_spans(held_out, engine, FINDINGS[name])
                block[system] = {"negated": score(neg)}
                if system == "context":
                    block[system]["possible_or_hypothetical"] = score(pos)
            entry["gold_spans"]["findings_held_out_half"] = block
        if args.baselines:
            findings = FINDINGS[name]
            compared = {"ours": run_ours(systems["context"], docs, findings)}
            # ours under ConText's conventions too (the default is the omop profile)
            compared["ours (context profile)"] = run_ours(
                ContextEngine.configured(profile="context"), docs, findings
            )
            for engine in BASELINES:
                compared[engine] = run_baseline(engine, docs, findings)
            entry["side_by_side"] = side_by_side(docs, findings, compared)
            print(name, json.dumps(entry["side_by_side"]), file=sys.stderr)
        if name == "BioScope":
            entry["restored"] = {
                k: v if isinstance(v, int) else len(v) for k, v in restored.items()
            }
            if args.baselines:  # on the findings each model finds there, too
                entry["side_by_side_findings"] = {}
                for label, extractor in extractors.items():
                    found = bioscope_findings(docs, extractor.extractor)
                    compared = {"ours": run_ours(systems["context"], found, {"Finding"})}
                    for engine in BASELINES:
                        compared[engine] = run_baseline(engine, found, {"Finding"})
                    block = side_by_side(found, {"Finding"}, compared)
                    entry["side_by_side_findings"][label] = block
                    print(name, label, json.dumps(block), file=sys.stderr)
        if extractors and name in MODEL_TYPES:
            entry["predicted_spans"] = {}
            for label, extractor in extractors.items():
                style = None
                if args.own_styles and name in readable_styles(extractor.extractor.manifest):
                    style = name
                entry["predicted_spans"][label] = predicted_spans(name, docs, extractor, style)
                entry["predicted_spans"][label]["style"] = style
        out["corpora"][name] = entry
        print(name, json.dumps(entry["gold_spans"]["all"]), file=sys.stderr)
    if args.baselines:
        notes = mtsamples_notes(fetched("MTSamples") / MTSAMPLES_FILE)
        spec = corpora()["MTSamples"]
        out["sections"] = {
            "corpus": f"MTSamples: github.com/{spec.repository}@{spec.commit[:12]}",
            "licence": spec.licence,
            **sections_side_by_side(notes, systems["context"]),
        }
        print("sections", json.dumps(out["sections"]), file=sys.stderr)
    out["check_set"] = discharge_check_set(args.baselines)
    print("check set", json.dumps(out["check_set"]["scores"]), file=sys.stderr)
    out["held_out_check_set"] = discharge_check_set(args.baselines, HELD_OUT_CHECK_SET)
    print("held-out check set", json.dumps(out["held_out_check_set"]["scores"]), file=sys.stderr)
    headline = {
        name: {
            "negated_f1_context": c["gold_spans"]["all"]["context"]["negated"]["f1"],
            "negated_f1_negex": c["gold_spans"]["all"]["negex"]["negated"]["f1"],
            **{
                f"{label}_negated_f1_end_to_end": p["negated_end_to_end"]["f1"]
                for label, p in c.get("predicted_spans", {}).items()
            },
            **{
                f"{label}_findings_recall": p["findings_recall"]
                for label, p in c.get("predicted_spans", {}).items()
            },
            **{
                f"{attribute}_f1": {
                    system: scores["f1"]
                    for system, scores in block.items()
                    if isinstance(scores, dict)
                }
                for attribute, block in c.get("side_by_side", {}).items()
                if attribute in SIDE_ATTRIBUTES
            },
        }
        for name, c in out["corpora"].items()
    }
    if "sections" in out:
        headline["sections"] = {
            system: {"coverage": out["sections"][system]["coverage"]}
            | {c: out["sections"][system][c]["f1"] for c in ATTRIBUTE_SECTIONS}
            for system in ("ours", "medspacy")
        }
    for key in ("check_set", "held_out_check_set"):
        headline[key] = {
            system: {a: s["f1"] for a, s in block.items()}
            for system, block in out[key]["scores"].items()
        }
    out["headline"] = headline
    out["models"] = args.model
    out["own_styles"] = args.own_styles
    out["split"] = args.split
    out["machine"] = machine()
    out["command"] = " ".join(["python", *sys.argv])
    dest = Path(args.out or RESULTS / ("assertion" if args.split == "all" else "assertion-test"))
    dest.mkdir(parents=True, exist_ok=True)
    (dest / "summary.json").write_text(json.dumps(out, indent=2) + "\n")
    print(json.dumps(headline))


if __name__ == "__main__":
    main()
