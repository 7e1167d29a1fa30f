"""The clinical model on notes as clinicians write them (issue 59): the note-style check set.

    python benchmarks/note_style.py check FILE [FILE …]
    python benchmarks/note_style.py run --model NAME=BUNDLE [--split test|dev|all]
        [--name note-style/NAME] [--without-shorthand]
    python benchmarks/note_style.py table note-style/test-before note-style/test

``check`` reads markup files (``benchmarks/data/note-style/notes-*.md``, written for this
project: GUIDELINES.md there) and counts what they hold. ``run`` annotates every note of the
split with the pipeline as the service runs it (the clinical context and the packaged
vocabulary's concepts on) and scores it against the gold:

- entities: strict (same span, same type) and overlap (touching, same type) precision, recall
  and F1, overall, per type and per note style; a model's entities of types the set does not
  annotate (a regimen's route, frequency and duration, a severity: GUIDELINES.md) are left out
  of the scores and counted apart (``unjudged_types``);
- layout: predicted entities (of every type) that cross a line break; that overlap a gold
  section header;
- shorthand: gold mentions written as an abbreviation of the shorthand table, found (overlap,
  right type), those the note-style training never wrote (``split.json``'s
  ``held_out_shorthand``, ``mslm_core.notestyle.HELD_OUT``) apart;
- vitals: every gold vital sign (a Test whose text is a vital-sign label, and its Result) found
  exactly, and its Test with no context attribute;
- context: per attribute, precision/recall/F1 over the strictly matched entities of the types
  that carry it;
- confidence: reliability (10 bins: mean confidence against the share right, strict), the
  expected calibration error, and in medication lists the right drugs below 0.5 and the
  wrong entities at or above it;
- language (``mslm_core.language``, the model aside): warnings on the English notes and their
  lines, and ``languages.tsv``'s 60 notes in Spanish, French, German, Italian, Portuguese and
  Dutch found as their language.

The split: ``split.json`` beside the notes lists the development notes (a third, drawn once
with a fixed seed); every choice made while building the reading was made on them, the figures
quoted are the others'. Counts only: the notes are synthetic and committed, and no text is
written to the results.
"""

from __future__ import annotations

import argparse
import json
import os
from collections import Counter, defaultdict
from collections.abc import Sequence
from pathlib import Path
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

from common import emit

from harness.notestyle import CONTEXT_TYPES, TYPES, MarkupError, Note, parse

DATA = Path(__file__).resolve().parent / "data" / "note-style"
SPLIT = DATA / "split.json"
ATTRIBUTES = ("negated", "possible", "hypothetical", "historical", "family", "allergy")
# the labels of vital signs, as notes write them
VITAL_LABELS = frozenset(
    {"bp", "blood pressure", "hr", "heart rate", "pulse", "rr", "resp", "respirations"}
    | {"respiratory rate", "t", "temp", "temperature", "tmax", "spo2", "sao2", "o2 sat"}
    | {"o2 sats", "sat", "sats", "pulse ox", "wt", "weight"}
)


def notes(split: str = "test") -> list[Note]:
    """The notes of the check set's ``split`` (test, dev or all), in file order."""
    out: list[Note] = []
    for path in sorted(DATA.glob("notes-*.md")):
        out.extend(parse(path))
    if split == "all":
        return out
    dev = set(json.loads(SPLIT.read_text())["dev"])
    return [n for n in out if (n.id in dev) == (split == "dev")]


def prf(tp: int, n_pred: int, n_gold: int, tp_gold: int | None = None) -> dict[str, float]:
    p = tp / n_pred if n_pred else 0.0
    r = (tp if tp_gold is None else tp_gold) / n_gold if n_gold else 0.0
    f = 2 * p * r / (p + r) if p + r else 0.0
    return {"precision": round(p, 4), "recall": round(r, 4), "f1": round(f, 4)}


class Tally:
    """Strict and overlap counts."""

    def __init__(self) -> None:
        self.c: Counter[str] = Counter()

    def add(self, gold: Sequence[Any], pred: Sequence[Any]) -> None:
        g = {(m.start, m.end, m.type) for m in gold}
        p = {(e.start, e.end, e.type) for e in pred}
        self.c["gold"] += len(g)
        self.c["pred"] += len(p)
        self.c["strict"] += len(g & p)
        self.c["overlap_pred"] += sum(
            any(a < e and s < b and t == u for a, b, u in g) for s, e, t in p
        )
        self.c["overlap_gold"] += sum(
            any(a < e and s < b and t == u for a, b, u in p) for s, e, t in g
        )

    def figures(self) -> dict[str, Any]:
        c = self.c
        return {
            "gold": c["gold"],
            "predicted": c["pred"],
            "strict": prf(c["strict"], c["pred"], c["gold"]),
            "overlap": prf(c["overlap_pred"], c["pred"], c["gold"], c["overlap_gold"]),
        }


SHORTHAND = Path(__file__).resolve().parents[1] / "mslm_core" / "data" / "shorthand.tsv"


def short_forms() -> frozenset[str]:
    """The short forms of this checkout's shorthand table (read here, not through the code
    under test, which may be another checkout's: ``PYTHONPATH=OTHER python …`` scores it)."""
    lines = SHORTHAND.read_text(encoding="utf-8").splitlines()
    return frozenset(line.split("\t", 1)[0] for line in lines if line and line[0] != "#")


def _abbreviated(text: str, forms: frozenset[str]) -> bool:
    """A gold mention written as shorthand: one short form of the table, as a whole (SOB,
    N/V, HTN), in capitals or with a slash."""
    return text.lower() in forms and (text.isupper() or "/" in text) and len(text) <= 8


def score(pipeline: Any, items: list[Note]) -> dict[str, Any]:
    table = short_forms()
    held_out = set(json.loads(SPLIT.read_text())["held_out_shorthand"])
    texts = [n.text for n in items]
    found = pipeline(texts)
    overall, by_type, by_style = Tally(), defaultdict(Tally), defaultdict(Tally)
    crossing = header_hits = 0
    shorthand: Counter[str] = Counter()
    vitals: Counter[str] = Counter()
    context: dict[str, Counter[str]] = {a: Counter() for a in ATTRIBUTES}
    bins: list[list[float]] = [[0, 0, 0.0] for _ in range(10)]  # entities, right, confidence
    med_list: Counter[str] = Counter()
    unjudged: Counter[str] = Counter()
    for note, every in zip(items, found, strict=True):
        # a type the check set does not annotate (a route, a frequency, a duration, a
        # severity: GUIDELINES.md, "Not annotated") is neither right nor wrong here; where it
        # stands (across a line, on a header) is judged all the same
        ents = [e for e in every if e.type in TYPES]
        unjudged.update(e.type for e in every if e.type not in TYPES)
        overall.add(note.mentions, ents)
        by_style[note.style].add(note.mentions, ents)
        for t in {m.type for m in note.mentions} | {e.type for e in ents}:
            by_type[t].add(
                [m for m in note.mentions if m.type == t], [e for e in ents if e.type == t]
            )
        crossing += sum("\n" in e.text for e in every)
        header_hits += sum(
            any(h.start < e.end and e.start < h.end for h in note.headers) for e in every
        )
        exact = {(e.start, e.end, e.type): e for e in ents}
        gold_exact = {(m.start, m.end, m.type) for m in note.mentions}
        for e in ents:
            right = (e.start, e.end, e.type) in gold_exact
            k = min(int(e.confidence * 10), 9)
            bins[k][0] += 1
            bins[k][1] += right
            bins[k][2] += e.confidence
            if note.style == "med_list":
                if e.type == "Drug" and right and e.confidence < 0.5:
                    med_list["right_drugs_below_0.5"] += 1
                if not right and e.confidence >= 0.5:
                    med_list["wrong_at_or_above_0.5"] += 1
                med_list["right_drugs"] += e.type == "Drug" and right
                med_list["wrong"] += not right
        for m in note.mentions:
            hit = any(e.type == m.type and e.start < m.end and m.start < e.end for e in ents)
            if m.type != "Result" and _abbreviated(m.text, table):
                group = "held_out" if m.text.lower() in held_out else "seen"
                shorthand[f"{group}_gold"] += 1
                shorthand[f"{group}_found"] += hit
            if m.type == "Test" and m.text.lower() in VITAL_LABELS:
                result = next(
                    (r for r in note.mentions if r.type == "Result" and 0 <= r.start - m.end <= 4),
                    None,
                )
                if result is None:
                    continue
                vitals["gold"] += 1
                test = exact.get((m.start, m.end, "Test"))
                value = exact.get((result.start, result.end, "Result"))
                vitals["test_and_result_exact"] += test is not None and value is not None
                vitals["no_cue"] += test is not None and (
                    test.assertion is None or test.assertion.present
                )
            predicted = exact.get((m.start, m.end, m.type))
            if predicted is None or m.type not in (*CONTEXT_TYPES, "Drug"):
                continue
            said = predicted.assertion
            for a in ATTRIBUTES:
                if (a == "allergy") != (m.type == "Drug"):
                    continue
                gold_a = a in m.attributes
                pred_a = bool(said is not None and getattr(said, a))
                context[a]["tp"] += gold_a and pred_a
                context[a]["gold"] += gold_a
                context[a]["pred"] += pred_a
    n = sum(b[0] for b in bins)
    ece = sum(abs(b[1] - b[2]) for b in bins) / n if n else 0.0  # Σ n_bin/n·|acc − conf|
    sh = {
        group: {
            "gold": shorthand[f"{group}_gold"],
            "found_and_typed_right": round(
                shorthand[f"{group}_found"] / shorthand[f"{group}_gold"], 4
            )
            if shorthand[f"{group}_gold"]
            else None,
        }
        for group in ("seen", "held_out")
    }
    total_gold = shorthand["seen_gold"] + shorthand["held_out_gold"]
    sh["all"] = {
        "gold": total_gold,
        "found_and_typed_right": round(
            (shorthand["seen_found"] + shorthand["held_out_found"]) / total_gold, 4
        )
        if total_gold
        else None,
    }
    return {
        "notes": len(items),
        "sentences": sum(n.sentences() for n in items),
        "entities": overall.figures(),
        # entities of types the check set does not annotate, left out of every score but
        # where they stand
        "unjudged_types": dict(sorted(unjudged.items())),
        "per_type": {t: by_type[t].figures() for t in sorted(by_type)},
        "per_style": {s: by_style[s].figures() for s in sorted(by_style)},
        "layout": {
            "entities_across_a_line_break": crossing,
            "entities_on_a_header": header_hits,
            "gold_headers": sum(len(n.headers) for n in items),
        },
        "shorthand": sh,
        "vitals": {
            "gold": vitals["gold"],
            "test_and_result_exact": round(vitals["test_and_result_exact"] / vitals["gold"], 4)
            if vitals["gold"]
            else None,
            "test_without_context_attribute": round(vitals["no_cue"] / vitals["gold"], 4)
            if vitals["gold"]
            else None,
        },
        "context": {
            a: {**prf(c["tp"], c["pred"], c["gold"]), "gold": c["gold"], "predicted": c["pred"]}
            for a, c in context.items()
        },
        "confidence": {
            "expected_calibration_error": round(ece, 4),
            "bins": [
                {
                    "range": f"{k / 10:.1f}-{(k + 1) / 10:.1f}",
                    "entities": int(b[0]),
                    "right": round(b[1] / b[0], 4) if b[0] else None,
                    "mean_confidence": round(b[2] / b[0], 4) if b[0] else None,
                }
                for k, b in enumerate(bins)
            ],
            "med_lists": dict(med_list),
        },
    }


def languages() -> dict[str, Any]:
    """The language check on the check set: every note and line of its English notes (none
    should be warned of), and ``languages.tsv``'s 60 notes in six other languages (each should
    be, as its own language)."""
    import csv

    from mslm_core.language import identify, other_language

    english = [n.text for n in notes("all")]
    lines = [line for text in english for line in text.splitlines() if line.strip()]
    with open(DATA / "languages.tsv", encoding="utf-8", newline="") as handle:
        others = list(csv.reader(handle, delimiter="\t"))[1:]
    judged = [identify(t) for t in [*english, *lines]]
    found: Counter[str] = Counter()
    for code, text in others:
        said = other_language(text, "en")
        found[code] += said is not None and said.code == code
    return {
        "english_notes": len(english),
        "english_notes_warned": sum(other_language(t, "en") is not None for t in english),
        "english_lines_judged": sum(identify(t) is not None for t in lines),
        "english_lines_warned": sum(other_language(t, "en") is not None for t in lines),
        # how near an English note or line came to a warning: the highest probability the
        # identifier gave another language on any of them
        "english_most_other_probability": max(
            (x.probability for x in judged if x is not None and x.code != "en"), default=0.0
        ),
        "other_notes": len(others),
        "other_notes_found": sum(found.values()),
        "found_per_language": dict(sorted(found.items())),
    }


def cmd_run(args: argparse.Namespace) -> int:
    from mslm_core.context import ContextEngine
    from mslm_core.linking.builtin import DEFAULT_VOCABULARY, load_linker
    from mslm_core.pipeline import AnnotationPipeline

    items = notes(args.split)
    results = {}
    linker = load_linker(DEFAULT_VOCABULARY)
    for spec in args.model:
        label, _, path = spec.rpartition("=")
        pipeline = AnnotationPipeline.from_bundle(
            path, context=ContextEngine.default(), linker=linker
        )
        if args.without_shorthand:  # what the model reads of shorthand on its own
            pipeline.shorthand = None
        results[label or Path(path).name] = score(pipeline, items)
    first = next(iter(results.values()))
    figures = {
        name: {
            "strict_f1": r["entities"]["strict"]["f1"],
            "overlap_f1": r["entities"]["overlap"]["f1"],
            "across_line_breaks": r["layout"]["entities_across_a_line_break"],
            "on_headers": r["layout"]["entities_on_a_header"],
            "shorthand_found": r["shorthand"]["all"]["found_and_typed_right"],
            "vitals_exact": r["vitals"]["test_and_result_exact"],
        }
        for name, r in results.items()
    }
    language = languages()
    emit(
        args.name,
        {
            "split": args.split,
            "shorthand_finder": not args.without_shorthand,
            "notes": first["notes"],
            "sentences": first["sentences"],
            **figures,
            "language": {k: language[k] for k in ("english_notes_warned", "english_lines_warned")}
            | {"other_found": f"{language['other_notes_found']}/{language['other_notes']}"},
        },
        {"models": results, "language": language},
    )
    return 0


def cmd_table(args: argparse.Namespace) -> int:
    """``summary.md``: the models of the given result files side by side (the first file's
    first model is the "before")."""
    from common import RESULTS

    columns: dict[str, dict[str, Any]] = {}
    for name in args.results:
        record = json.loads((RESULTS / f"{name}.json").read_text())
        columns.update(record["details"]["models"])
    first = next(iter(columns.values()))

    def row(label: str, get: Any) -> str:
        return f"| {label} | " + " | ".join(str(get(r)) for r in columns.values()) + " |"

    lines = [
        "# The note-style check set: before and after",
        "",
        f"{first['notes']} test notes, {first['sentences']} sentences, "
        f"{first['entities']['gold']} gold entities "
        "(`python benchmarks/note_style.py table "
        + " ".join(args.results)
        + "`; each file's command in it).",
        "",
        "| | " + " | ".join(columns) + " |",
        "|---|" + "---|" * len(columns),
        row("strict F1", lambda r: r["entities"]["strict"]["f1"]),
        row("overlap F1", lambda r: r["entities"]["overlap"]["f1"]),
        row("entities across a line break", lambda r: r["layout"]["entities_across_a_line_break"]),
        row("entities on a section header", lambda r: r["layout"]["entities_on_a_header"]),
        row(
            "shorthand found and typed right (seen / held out of training)",
            lambda r: (
                f"{r['shorthand']['seen']['found_and_typed_right']} / "
                f"{r['shorthand']['held_out']['found_and_typed_right']}"
            ),
        ),
        row("vitals: test and result exact", lambda r: r["vitals"]["test_and_result_exact"]),
        row(
            "vitals: test without a context attribute",
            lambda r: r["vitals"]["test_without_context_attribute"],
        ),
        row(
            "expected calibration error",
            lambda r: r["confidence"]["expected_calibration_error"],
        ),
        row(
            "medication lists: right drugs below 0.5 / wrong entities at or above",
            lambda r: (
                f"{r['confidence']['med_lists'].get('right_drugs_below_0.5', 0)} of "
                f"{r['confidence']['med_lists'].get('right_drugs', 0)} / "
                f"{r['confidence']['med_lists'].get('wrong_at_or_above_0.5', 0)} of "
                f"{r['confidence']['med_lists'].get('wrong', 0)}"
            ),
        ),
    ]
    types = sorted(first["per_type"])
    lines += ["", "Per type, strict / overlap F1 (gold entities):", ""]
    lines += ["| type | " + " | ".join(columns) + " |", "|---|" + "---|" * len(columns)]
    for t in types:
        lines.append(
            row(
                f"{t} ({first['per_type'][t]['gold']})",
                lambda r, t=t: (
                    f"{r['per_type'][t]['strict']['f1']} / {r['per_type'][t]['overlap']['f1']}"
                ),
            )
        )
    lines += ["", "Per note style, strict / overlap F1:", ""]
    lines += ["| style | " + " | ".join(columns) + " |", "|---|" + "---|" * len(columns)]
    for style in sorted(first["per_style"]):
        lines.append(
            row(
                f"{style} ({first['per_style'][style]['gold']})",
                lambda r, s=style: (
                    f"{r['per_style'][s]['strict']['f1']} / {r['per_style'][s]['overlap']['f1']}"
                ),
            )
        )
    lines += [
        "",
        "Context, F1 on each model's strictly matched entities (how many of them have the "
        "attribute in the gold):",
        "",
    ]
    lines += ["| attribute | " + " | ".join(columns) + " |", "|---|" + "---|" * len(columns)]
    for a in ATTRIBUTES:
        lines.append(row(a, lambda r, a=a: f"{r['context'][a]['f1']} ({r['context'][a]['gold']})"))
    (RESULTS / "note-style" / "summary.md").write_text("\n".join(lines) + "\n")
    print(json.dumps({n: r["entities"]["strict"]["f1"] for n, r in columns.items()}))
    return 0


def cmd_check(args: argparse.Namespace) -> int:
    status = 0
    for name in args.files:
        try:
            items = parse(name)
        except MarkupError as exc:
            print(f"error: {exc}")
            status = 1
            continue
        types = Counter(m.type for n in items for m in n.mentions)
        attrs = Counter(a for n in items for m in n.mentions for a in m.attributes)
        styles = Counter(n.style for n in items)
        print(
            f"{name}: {len(items)} notes, {sum(n.sentences() for n in items)} sentences, "
            f"{sum(len(n.mentions) for n in items)} entities, "
            f"{sum(len(n.headers) for n in items)} headers"
        )
        print("  styles:", dict(sorted(styles.items())))
        print("  types:", dict(sorted(types.items())))
        print("  attributes:", dict(sorted(attrs.items())))
    return status


def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("check", help="read markup files and count what they hold")
    p.add_argument("files", nargs="+")
    p.set_defaults(handler=cmd_check)
    p = sub.add_parser("run", help="score models on the check set")
    p.add_argument("--model", action="append", required=True, help="NAME=BUNDLE (repeatable)")
    p.add_argument("--split", choices=["test", "dev", "all"], default="test")
    p.add_argument("--name", default="note-style/check", help="the result file under results/")
    p.add_argument(
        "--without-shorthand",
        action="store_true",
        help="leave the pipeline's shorthand finder out (what the model alone reads)",
    )
    p.set_defaults(handler=cmd_run)
    p = sub.add_parser("table", help="results side by side in results/note-style/summary.md")
    p.add_argument("results", nargs="+", help="result names (note-style/test-before …)")
    p.set_defaults(handler=cmd_table)
    args = parser.parse_args()
    return int(args.handler(args))


if __name__ == "__main__":
    raise SystemExit(main())
