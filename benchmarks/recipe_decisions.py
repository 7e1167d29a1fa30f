"""The clinical recipe's decisions, argued from development figures only.

    python benchmarks/recipe_decisions.py [--cache DIR]

Reads the committed training runs — the recipe's three seeds (``results/clinical/runs/
merged-all-s*.json``) and each ablation (``results/clinical/ablations/merged-*.json``) — and
the recipe's training corpora (their words, from the corpus cache), and writes
``results/clinical/decisions.json`` (and a summary on its last line). Nothing is trained.

For every variant the recipe could have taken: the dev macro F1 (the mean of the four corpora's
dev strict F1, the figure the job selects its epoch by) and each corpus's, against the recipe's
runs of the same seeds; its work against the recipe's — the words read per epoch (each corpus's
training words times its sampling weight) times the epochs (the masked-LM epoch and the
fine-tuning ones), which styles and note style leave as they are; and the first start that work
would give — the committed first start's minutes, plus its training minutes times the extra
work — against the 35 minutes the first start must stay within on 2 CPU cores. The runs' own
CPU seconds are kept beside it (``train_cpu_ratio_measured``) but not used: most of these runs
shared the machine with other work, and the same work took from 0.9 to 1.8 times as long.

The rule: take the variant with the best dev macro F1
whose projected first start stays within the bound and whose dev figure was read the way the
service reads text. A variant with source styles is scored on dev with each corpus's own style,
which a service reading a hospital's notes cannot ask for: its dev figure is not the served
model's, and the rule cannot take it (``dev_read_as_served`` false). Test figures are neither
read nor written here.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path
from typing import Any

from common import RESULTS

from mslm_core.corpora.clinical import RECIPE

#: the committed runs it reads (wherever MSLM_BENCH_RESULTS sends what it writes)
CLINICAL = Path(__file__).resolve().parent / "results" / "clinical"
#: the bound on the first start (issue 53: "within 35 minutes on 2 CPU cores")
FIRST_START_BOUND_MINUTES = 35.0
#: each variant: what it changes, its run files (by seed), whether its dev figure is read as
#: the service reads text, and what the recipe does about it
VARIANTS: dict[str, dict[str, Any]] = {
    "pubmed-weight1": {
        "change": "BC5CDR and NCBI-disease sampled at weight 1 instead of 0.5",
        "files": {1: "merged-pubmed-weight1-s1", 2: "merged-pubmed-weight1-s2"},
        "served": True,
    },
    "epochs5": {
        "change": "5 fine-tuning epochs instead of 3",
        "files": {1: "merged-epochs5-s1"},
        "served": True,
    },
    "note-style-0.3": {
        "change": "a third of the training sentences rewritten as clinicians write notes",
        "files": {1: "merged-note-style-0.3-s1"},
        "served": True,
    },
    "styles": {
        "change": "source styles: each window opens with its corpus's name",
        "files": {1: "merged-styles-s1", 2: "merged-styles-s2"},
        "served": False,
    },
    "styles-weight1": {
        "change": "source styles and the PubMed corpora at weight 1",
        "files": {1: "merged-styles-weight1-s1"},
        "served": False,
    },
    "styles-weight1-blank": {
        "change": "source styles, weight 1, half the windows with no style",
        "files": {1: "merged-styles-weight1-blank-s1"},
        "served": False,
    },
    "styles-weight1-epochs5": {
        "change": "source styles, weight 1 and 5 epochs",
        "files": {1: "merged-styles-weight1-epochs5-s1", 2: "merged-styles-weight1-epochs5-s2"},
        "served": False,
    },
}
#: what the recipe (mslm_core.corpora.clinical) takes of them, and why where the rule does not
#: choose it: note style is for notes, which the source corpora's dev documents are not
TAKEN = {
    "note-style-0.3": "for notes: on the note-style set's development notes it read more of "
    "the shorthand (docs/notes.md); on the source corpora's dev documents it is level"
}
RULE = (
    "the variant with the best dev macro F1 above the recipe's, among those whose projected "
    "first start stays within the bound and whose dev figure is read as the service reads text"
)


def _run(path: Path) -> dict[str, Any]:
    run = json.loads(path.read_text(encoding="utf-8"))
    best = next(h for h in run["history"] if h["epoch"] == run["best_epoch"])
    return {
        "dev_macro_f1": run["dev_macro_f1"],
        "dev_per_corpus": best["dev_sources"],
        "train_cpu_seconds": run["train_cpu_seconds"],
        "weights": run.get("weights") or {s.corpus: s.weight for s in RECIPE},
        "epochs": run["config"]["epochs"] + run["config"]["tapt_epochs"],
    }


def training_words(cache: str | None) -> dict[str, int]:
    """The words of each corpus's training split, as the recipe prepares it."""
    from mslm_core.corpora.clinical import dataset_files, prepare
    from mslm_core.corpus import read_corpus

    out = {}
    for source in RECIPE:
        corpus = read_corpus(dataset_files(prepare(source.corpus, cache))["train"])
        out[source.corpus] = sum(len(s.word_spans) for s in corpus.sentences)
    return out


def _work(run: dict[str, Any], words: dict[str, int]) -> float:
    return run["epochs"] * sum(run["weights"][c] * n for c, n in words.items())


def _mean(values: list[float]) -> float:
    return round(statistics.mean(values), 4)


def decide(words: dict[str, int]) -> dict[str, Any]:
    recipe = {s: _run(CLINICAL / "runs" / f"merged-all-s{s}.json") for s in (1, 2, 3)}
    first = json.loads((CLINICAL / "first-start.json").read_text(encoding="utf-8"))
    train_minutes = first["train_seconds"] / 60
    out: dict[str, Any] = {}
    for name, v in VARIANTS.items():
        runs = {s: _run(CLINICAL / "ablations" / f"{f}.json") for s, f in v["files"].items()}
        seeds = sorted(runs)
        diff = [runs[s]["dev_macro_f1"] - recipe[s]["dev_macro_f1"] for s in seeds]
        measured = [runs[s]["train_cpu_seconds"] / recipe[s]["train_cpu_seconds"] for s in seeds]
        work = _work(runs[seeds[0]], words) / _work(recipe[1], words)
        corpora = list(recipe[1]["dev_per_corpus"])
        projected = first["minutes_to_served"] + (work - 1) * train_minutes
        out[name] = {
            "change": v["change"],
            "seeds": seeds,
            "dev_macro_f1": _mean([runs[s]["dev_macro_f1"] for s in seeds]),
            "recipe_dev_macro_f1": _mean([recipe[s]["dev_macro_f1"] for s in seeds]),
            "dev_macro_f1_diff": _mean(diff),
            "dev_macro_f1_diff_per_seed": [round(d, 4) for d in diff],
            "dev_per_corpus_diff": {
                c: _mean(
                    [runs[s]["dev_per_corpus"][c] - recipe[s]["dev_per_corpus"][c] for s in seeds]
                )
                for c in corpora
            },
            "work_ratio": round(work, 3),
            "train_cpu_ratio_measured": [round(c, 2) for c in measured],
            "projected_first_start_minutes": round(projected, 1),
            "within_first_start_bound": projected <= FIRST_START_BOUND_MINUTES,
            "dev_read_as_served": v["served"],
            "taken_by_the_recipe": name in TAKEN,
        }
    eligible = [
        n
        for n, r in out.items()
        if r["dev_read_as_served"] and r["within_first_start_bound"] and r["dev_macro_f1_diff"] > 0
    ]
    chosen = max(eligible, key=lambda n: out[n]["dev_macro_f1_diff"]) if eligible else None
    return {
        "training_words": words,
        "recipe_dev_macro_f1_per_seed": {
            str(s): round(r["dev_macro_f1"], 4) for s, r in recipe.items()
        },
        "first_start_minutes": first["minutes_to_served"],
        "first_start_train_minutes": round(train_minutes, 1),
        "first_start_bound_minutes": FIRST_START_BOUND_MINUTES,
        "variants": out,
        "rule": RULE,
        "rule_chooses": chosen,
        "recipe_takes": TAKEN,
        "rule_and_recipe_agree": chosen is None or chosen in TAKEN,
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cache", help="the corpus cache (default: MSLM_CORPUS_CACHE)")
    args = ap.parse_args()
    decided = decide(training_words(args.cache))
    decided["headline"] = {
        "rule_chooses": decided["rule_chooses"],
        "rule_and_recipe_agree": decided["rule_and_recipe_agree"],
        **{
            n: [r["dev_macro_f1_diff"], r["work_ratio"], r["projected_first_start_minutes"]]
            for n, r in decided["variants"].items()
        },
    }
    summary = {**decided, "command": "python benchmarks/recipe_decisions.py"}
    path = RESULTS / "clinical" / "decisions.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(summary, indent=1) + "\n", encoding="utf-8")
    print(json.dumps(summary["headline"]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
