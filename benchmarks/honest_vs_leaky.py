"""Honest vs reference-leaky test scores of trained bundles (docs/method.md §3b).

Honest: the product's prediction path, unmasked input. reference-leaky: the research code's
protocol, test sentences masked with their gold mentions first (MLM strategies only).

    python benchmarks/honest_vs_leaky.py --data DIR/test.tsv --name NAME BUNDLE [BUNDLE ...]
"""

from __future__ import annotations

import argparse
import os
import sys
import time

from common import emit

os.environ.setdefault("HF_HUB_OFFLINE", "1")


def main() -> None:
    from harness.leaky import evaluate_reference_leaky
    from mslm_core.bundle import load_bundle
    from mslm_core.config import TrainConfig
    from mslm_core.corpus import read_corpus
    from mslm_core.evaluate import evaluate_corpus
    from mslm_core.inference import EntityExtractor

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("bundles", nargs="+")
    ap.add_argument("--data", required=True, help="test corpus")
    ap.add_argument("--name", required=True, help="results/<name>.json")
    args = ap.parse_args()
    corpus = read_corpus(args.data)
    rows = {}
    for path in args.bundles:
        extractor = EntityExtractor.from_bundle(path, backend="torch", device="cpu")
        predictor = extractor.predictor
        bundle = load_bundle(path, manifest=extractor.manifest)
        config = TrainConfig.from_dict(bundle.manifest["config"])
        label = config.strategy + (
            f"/detect_on={config.detect_on}" if config.masking_strategy else ""
        )
        started = time.perf_counter()
        honest = evaluate_corpus(predictor, corpus)
        row = {
            "honest_f1": round(honest["strict"]["f1"], 4),
            "honest_em": round(honest["exact_match"], 4),
            "leaky_f1": None,
            "leaky_em": None,
            "best_epoch": bundle.manifest["best_epoch"],
            "dev_f1_per_epoch": [h["dev_f1"] for h in bundle.manifest["history"]],
            "train_seconds": bundle.manifest["train_seconds"],
        }
        if config.masking_strategy == "mslm":
            leaky = evaluate_reference_leaky(bundle, corpus)
            row["leaky_f1"] = round(leaky["strict"]["f1"], 4)
            row["leaky_em"] = round(leaky["exact_match"], 4)
        row["eval_seconds"] = round(time.perf_counter() - started, 1)
        rows[label] = row
        print(label, row, file=sys.stderr)
    emit(args.name, {"test": rows}, {"data": args.data, "bundles": args.bundles})


if __name__ == "__main__":
    main()
