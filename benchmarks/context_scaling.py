"""Clinical context (ConText) time against text length, on the texts that made it quadratic
(issue 29 item 1: ``"Cisplatin " + "no " * 12000`` took 66 s and held every other request).

    python benchmarks/context_scaling.py [--sizes 1000 3000 10000 30000 100000] [--rounds 3]

Eight texts per size (characters): trigger words only after one entity ("Cisplatin no no …"),
a finding after every trigger ("no fever no fever …", an entity every two words), a plain
clinical sentence repeated, a section header on every line ("Plan: fever", issue 31) and one
negated list as long as the text ("denies fever, fever, …": the list-aware scope), one list
announced by a colon in a sentence and one on the lines below it ("Return if you develop:" then
"- fever" on every line), and a colon ending every line ("- fever, call if:"). The engine
runs on the entities as the service gives them; the figure is the median time per character
over ``--rounds``. Flat from the smallest size to the largest means linear. Writes
``results/context_scaling.json``; the last line printed is its headline.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

from common import emit

from mslm_core.context import ContextEngine, default_rules
from mslm_core.types import Entity

SENTENCE = "Patient denies chest pain but reports fever; no history of diabetes. "


def texts(size: int) -> dict[str, tuple[str, list[Entity]]]:
    def entities(text: str, word: str) -> list[Entity]:
        out, at = [], text.find(word)
        while at != -1:
            out.append(Entity(at, at + len(word), word, "Problem", 0.9, 0.9, 1.0))
            at = text.find(word, at + len(word))
        return out

    triggers = ("Cisplatin " + "no " * size)[:size]
    every = ("no fever " * size)[:size]
    plain = (SENTENCE * (size // len(SENTENCE) + 1))[:size]
    headers = ("Plan: fever\nPMH: fever\n" * size)[:size]
    listed = ("denies " + "fever, " * size)[:size]
    announced = ("Call your doctor if you develop any of the following: " + "fever, " * size)[:size]
    bullets = ("Return if you develop:\n" + "- fever\n" * size)[:size]
    nested = ("- fever, call if:\n" * size)[:size]
    return {
        "one entity, then trigger words": (
            triggers,
            [Entity(0, 9, "Cisplatin", "Drug", 0.9, 0.9, 1.0)],
        ),
        "a finding after every trigger": (every, entities(every, "fever")),
        "clinical sentences": (plain, entities(plain, "fever") + entities(plain, "diabetes")),
        "a section header on every line": (headers, entities(headers, "fever")),
        "one negated list": (listed, entities(listed, "fever")),
        "one announced list": (announced, entities(announced, "fever")),
        "one announced list of lines": (bullets, entities(bullets, "fever")),
        "every line announcing one": (nested, entities(nested, "fever")),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", type=int, nargs="+", default=[1000, 3000, 10000, 30000, 100000])
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    engine = ContextEngine(default_rules())
    table: dict[str, dict[str, float]] = {}
    for size in args.sizes:
        for name, (text, ents) in texts(size).items():
            seconds = []
            for _ in range(args.rounds):
                started = time.perf_counter()
                engine.apply(text, ents)
                seconds.append(time.perf_counter() - started)
            table.setdefault(name, {})[str(size)] = statistics.median(seconds)
            print(
                f"{name:32s} {size:>7d} chars {len(ents):>6d} entities "
                f"{statistics.median(seconds):8.3f} s",
                file=sys.stderr,
            )
    per_char = {
        name: {size: 1e6 * s / int(size) for size, s in row.items()} for name, row in table.items()
    }
    figures = {
        "largest_seconds": {
            name: round(row[str(args.sizes[-1])], 3) for name, row in table.items()
        },
        # time per character at the largest size / at the smallest: 1.0 is linear
        "per_char_ratio_largest_to_smallest": {
            name: round(row[str(args.sizes[-1])] / row[str(args.sizes[0])], 2)
            for name, row in per_char.items()
        },
    }
    emit(
        "context_scaling",
        figures,
        {
            "seconds": table,
            "microseconds_per_char": per_char,
            "sizes": args.sizes,
            "rounds": args.rounds,
        },
    )


if __name__ == "__main__":
    main()
