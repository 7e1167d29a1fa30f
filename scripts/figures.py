"""Check the README's and docs/' registered figures against their result files, or write them.

    python scripts/figures.py            # every difference, page:line: what (exit 1 if any)
    python scripts/figures.py --write    # each registered figure written from its file

Both also list the lines with a decimal that name neither their file nor why they have none
(``unaccounted``, what tests/test_figures.py checks too): those --write cannot mend.

The registry: benchmarks/harness/figures.py.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))

from harness.figures import all_lines, check, unaccounted


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--write", action="store_true", help="write each figure from its file")
    args = ap.parse_args()
    problems = check(write=args.write)
    for p in problems:
        print(p)
    loose = unaccounted()
    for p in loose:
        print(f"unaccounted: {p}")
    lines = all_lines()
    figures = sum(f is not None for line in lines for f in line.figures)
    print(
        f"{figures} figures on {len(lines)} lines; {len(problems)} differences; "
        f"{len(loose)} lines unaccounted",
        file=sys.stderr,
    )
    return 1 if loose or (problems and not args.write) else 0


if __name__ == "__main__":
    sys.exit(main())
