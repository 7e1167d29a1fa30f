"""What a full Athena download costs to import and to link with (issue 54: at most 4 GB RSS to
import; linking at most 15 % of annotate time with it).

    python benchmarks/athena_scale.py [--scale 1.0] [--work DIR] [--keep]

No full Athena download is at hand (its SNOMED, CPT4 and MedDRA parts need licences), so the
tables are synthetic with the sizes of one: ``--scale 1`` writes about 5.4 million concepts in
the proportions of an Athena download with SNOMED, LOINC, RxNorm, RxNorm Extension, ICD-10-CM,
ICD-9-CM, CPT4, HCPCS and NDC (standard and non-standard, valid and not), 3 million synonyms
(English and not) and 40 million relationships (a quarter "Maps to"), as Athena writes them
(tab-separated, ``YYYYMMDD`` dates). Names are 1–4 words drawn from the words of the packaged
MeSH vocabulary's names. Each phase runs in a process of its own so that its peak memory is
its own:

- **import**: ``omop_vocabulary`` over the files (what ``mslm vocab import --athena`` runs
  before storing): the tables streamed through SQLite into the linking vocabulary;
- **index**: the vocabulary read and its n-gram index built and saved (the rest of the import);
- **activate**: the linker from the saved index (a replica activating it, or restarting);
- **link**: 2,000 distinct look-ups, cold, of names of kept concepts with a word dropped or a
  letter changed, each as its type, as a note's mentions would be.

Writes ``results/linking/athena_scale.json``; the last line printed is its headline.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from common import emit

#: (domain, vocabulary, class, standard, count at scale 1)
MIX = [
    ("Condition", "SNOMED", "Clinical Finding", "S", 110_000),
    ("Procedure", "SNOMED", "Procedure", "S", 60_000),
    ("Spec Anatomic Site", "SNOMED", "Body Structure", "S", 40_000),
    ("Observation", "SNOMED", "Clinical Finding", "S", 120_000),
    ("Device", "SNOMED", "Physical Object", "S", 80_000),
    ("Condition", "SNOMED", "Clinical Finding", "", 500_000),
    ("Measurement", "LOINC", "Lab Test", "S", 100_000),
    ("Observation", "LOINC", "Answer", "", 150_000),
    ("Drug", "RxNorm", "Ingredient", "S", 13_000),
    ("Drug", "RxNorm", "Clinical Drug", "S", 150_000),
    ("Drug", "RxNorm Extension", "Ingredient", "S", 15_000),
    ("Drug", "RxNorm Extension", "Marketed Product", "S", 2_000_000),
    ("Procedure", "CPT4", "CPT4", "S", 15_000),
    ("Procedure", "HCPCS", "HCPCS", "S", 8_000),
    ("Condition", "ICD10CM", "4-char billing code", "", 95_000),
    ("Condition", "ICD9CM", "4-dig billing code", "", 17_000),
    ("Drug", "NDC", "11-digit NDC", "", 1_000_000),
    ("Condition", "SNOMED", "Clinical Finding", "", 900_000),  # of those, invalid ones
]
LANGUAGES = ("4180186", "4180186", "4180190", "4182511")  # English twice as often


def clinical_words() -> list[str]:
    """The distinct words of the packaged MeSH vocabulary's names: synthetic names made of
    them share character n-grams as a clinical vocabulary's do (names of a few syllables
    share every n-gram, and cost a search far more than real names)."""
    from mslm_core.linking.builtin import DEFAULT_VOCABULARY
    from mslm_core.linking.vocabulary import read_vocabulary

    found = {
        w
        for _, name in read_vocabulary(DEFAULT_VOCABULARY).names()
        for w in name.lower().replace(",", " ").split()
        if w.isalpha() and 2 < len(w) < 20
    }
    return sorted(found)


def synthesize(folder: Path, scale: float, seed: int = 54) -> dict:
    """The three tables in ``folder``; what they hold."""
    rng = random.Random(seed)
    words = clinical_words()

    def name() -> str:
        return " ".join(rng.choice(words) for _ in range(rng.randint(1, 4)))

    folder.mkdir(parents=True, exist_ok=True)
    counts = {"concepts": 0, "synonyms": 0, "relationships": 0}
    standard: list[int] = []  # kept standard concepts, for the maps
    cid = 1_000_000
    with open(folder / "CONCEPT.csv", "w", encoding="utf-8") as out:
        out.write(
            "concept_id\tconcept_name\tdomain_id\tvocabulary_id\tconcept_class_id\t"
            "standard_concept\tconcept_code\tvalid_start_date\tvalid_end_date\tinvalid_reason\n"
        )
        for k, (domain, vocabulary, klass, std, n) in enumerate(MIX):
            invalid = "D" if k == len(MIX) - 1 else ""
            for _ in range(int(n * scale)):
                cid += 1
                if std == "S" and len(standard) < 2_000_000:
                    standard.append(cid)
                out.write(
                    f"{cid}\t{name()}\t{domain}\t{vocabulary}\t{klass}\t{std}\t{cid}\t"
                    f"19700101\t20991231\t{invalid}\n"
                )
                counts["concepts"] += 1
    last = cid
    with open(folder / "CONCEPT_SYNONYM.csv", "w", encoding="utf-8") as out:
        out.write("concept_id\tconcept_synonym_name\tlanguage_concept_id\n")
        for _ in range(int(3_000_000 * scale)):
            out.write(f"{rng.randint(1_000_001, last)}\t{name()}\t{rng.choice(LANGUAGES)}\n")
            counts["synonyms"] += 1
    with open(folder / "CONCEPT_RELATIONSHIP.csv", "w", encoding="utf-8") as out:
        out.write(
            "concept_id_1\tconcept_id_2\trelationship_id\tvalid_start_date\tvalid_end_date\t"
            "invalid_reason\n"
        )
        for k in range(int(40_000_000 * scale)):
            a = rng.randint(1_000_001, last)
            if k % 4 == 0:
                b, kind = rng.choice(standard), "Maps to"
            else:
                b, kind = rng.randint(1_000_001, last), rng.choice(("Is a", "Subsumes", "Has ing"))
            out.write(f"{a}\t{b}\t{kind}\t19700101\t20991231\t\n")
            counts["relationships"] += 1
    counts["mb"] = round(sum(p.stat().st_size for p in folder.iterdir()) / 1e6, 1)
    return counts


def phase(name: str, work: Path) -> dict:
    """One phase, in this process (the parent runs each in a child)."""
    started = time.perf_counter()
    out: dict = {}
    vocabulary = work / "omop.tsv"
    if name == "import":
        from mslm_core.linking.athena import AthenaFiles, omop_vocabulary

        counts = omop_vocabulary(AthenaFiles(work / "tables"), vocabulary, work=work)
        out = {
            "concepts": dict(counts.concepts),
            "mapped": counts.mapped,
            "synonyms": counts.synonyms,
            "rows_read": counts.rows_read,
            "tsv_mb": round(vocabulary.stat().st_size / 1e6, 1),
        }
    elif name == "index":
        from mslm_core.linking.builtin import cached_index
        from mslm_core.linking.vocabulary import read_vocabulary

        read = read_vocabulary(vocabulary)
        index = cached_index(vocabulary, work / "index", read)
        out = {"concepts": len(read), "names": len(index.name_concept)}
    else:
        from mslm_core.linking.builtin import load_linker

        linker = load_linker(vocabulary, cache=work / "index")
        out = {"concepts": len(linker.vocabulary)}
        if name == "link":
            out.update(_lookups(linker))
    out["seconds"] = round(time.perf_counter() - started, 1)
    out["peak_rss_mb"] = round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)
    return out


def _lookups(linker, n: int = 2000, seed: int = 7) -> dict:
    """Cold look-ups of names of kept concepts, a word dropped or a letter changed."""
    rng = random.Random(seed)
    standard = [c for c in linker.vocabulary.concepts.values() if c.maps_to is None]
    kinds = {
        "Condition": "Problem",
        "Measurement": "Test",
        "Procedure": "Procedure",
        "Spec Anatomic Site": "Anatomy",
        "Drug": "Drug",
    }
    queries, types, right = [], [], []
    for concept in rng.sample(standard, min(n, len(standard))):
        words = concept.name.split()
        if len(words) > 1 and rng.random() < 0.5:
            words.pop(rng.randrange(len(words)))
        text = " ".join(words)
        at = rng.randrange(len(text))
        text = text[:at] + rng.choice("aeiou") + text[at + 1 :]
        queries.append(text)
        types.append(kinds[concept.parts[0].split(":")[0]])
        right.append(concept.id)
    started = time.perf_counter()
    found = linker.candidates(queries, types)
    seconds = time.perf_counter() - started
    return {
        "lookups": len(queries),
        "ms_per_lookup": round(1000 * seconds / len(queries), 3),
        "accuracy_at_1": round(
            sum(bool(f) and f[0].id == r for f, r in zip(found, right, strict=True)) / len(right),
            4,
        ),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--scale", type=float, default=1.0, help="of a full download (default: 1)")
    ap.add_argument("--work", help="where the tables go (default: a temporary folder)")
    ap.add_argument("--keep", action="store_true", help="keep the tables and the vocabulary")
    ap.add_argument("--phase", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.phase:  # a child: one phase
        print(json.dumps(phase(args.phase, Path(args.work))))
        return
    work = Path(args.work or tempfile.mkdtemp(prefix="athena-scale-"))
    try:
        started = time.perf_counter()
        tables = synthesize(work / "tables", args.scale)
        tables["seconds"] = round(time.perf_counter() - started, 1)
        phases = {}
        for name in ("import", "index", "activate", "link"):
            child = subprocess.run(
                [sys.executable, __file__, "--phase", name, "--work", str(work)],
                capture_output=True,
                text=True,
                check=True,
                env={**os.environ, "HF_HUB_OFFLINE": "1"},
            )
            phases[name] = json.loads(child.stdout.strip().splitlines()[-1])
            print(name, json.dumps(phases[name]), file=sys.stderr)
        headline = {
            "scale": args.scale,
            "tables": tables,
            "import_peak_rss_mb": phases["import"]["peak_rss_mb"],
            "import_seconds": phases["import"]["seconds"],
            "index_peak_rss_mb": phases["index"]["peak_rss_mb"],
            "index_seconds": phases["index"]["seconds"],
            "activate_peak_rss_mb": phases["activate"]["peak_rss_mb"],
            "activate_seconds": phases["activate"]["seconds"],
            "ms_per_lookup": phases["link"]["ms_per_lookup"],
            "lookup_accuracy_at_1": phases["link"]["accuracy_at_1"],
            "concepts_kept": phases["import"]["concepts"],
            "names": phases["index"]["names"],
        }
        emit("linking/athena_scale", headline, {"phases": phases})
    finally:
        if not args.keep and not args.work:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
