"""Seconds per training step, vanilla vs MSLM (ELM 1.0, BLM 0.075), on the same batches.

Both trainers are built from the same corpus slice and seed, so batch ``k`` holds the same
NCBI-disease windows for both; steps are interleaved (vanilla k, MSLM k, vanilla k+1, …) so
that machine noise hits both alike. Target (issue 2): median ratio MSLM/vanilla ≤ 1.15 on CPU.
The floating-point operations of both (``torch.utils.flop_counter``, forward + backward on
every timed batch) are reported beside the times: the vocabulary projection at the masked
positions is what MSLM adds, and on a compute-bound CPU the time ratio cannot go far below
the FLOP ratio.

    python benchmarks/train_step.py [--steps 40] [--warmup 5] [--batch-size 16]
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
from pathlib import Path

from common import DATA, emit

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")


def flop_counts(trainers: dict, batches: list[list[int]], first: int) -> dict[str, float]:
    """Forward + backward FLOPs of each trainer's model over ``batches``, which are steps
    ``first``, ``first + 1``, … of epoch 0 (so the masks are those of the timed steps); no
    optimizer step, so the models are unchanged."""
    from torch.utils.flop_counter import FlopCounterMode

    totals = {}
    for name, trainer in trainers.items():
        counter = FlopCounterMode(display=False)
        with counter:
            for k, batch_idx in enumerate(batches, start=first):
                windows = [trainer.windows[i] for i in batch_idx]
                batch = trainer.collator(windows, trainer._rngs(0, k, batch_idx))
                out = trainer.model(**batch, spec=trainer.loss_spec)
                out.loss.backward()
                trainer.optimizer.zero_grad(set_to_none=True)
        totals[name] = float(counter.get_total_flops())
    return totals


def main() -> None:
    from mslm_core.config import TrainConfig
    from mslm_core.train import Trainer

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", default=str(DATA / "NCBI-disease-IOB"))
    ap.add_argument("--base-model", default="minilm")
    ap.add_argument("--steps", type=int, default=40)
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--batch-size", type=int, default=16)
    ap.add_argument("--device", default="cpu")
    args = ap.parse_args()

    n_sentences = (args.steps + args.warmup) * args.batch_size
    trainers = {}
    with tempfile.TemporaryDirectory() as tmp:
        for strategy in ("vanilla", "mslm"):
            cfg = TrainConfig(
                train=f"{args.data}/train.tsv",
                dev=f"{args.data}/devel.tsv",
                base_model=args.base_model,
                strategy=strategy,
                elm_rate=1.0,
                blm_rate=0.075,
                batch_size=args.batch_size,
                max_train_sentences=n_sentences,
                device=args.device,
                seed=1,
            )
            trainer = Trainer(cfg, Path(tmp) / strategy)
            trainer.prepare()
            trainer.model.train()
            trainers[strategy] = trainer
        batches = trainers["vanilla"].epoch_batches(0)
        assert batches == trainers["mslm"].epoch_batches(0), "batches differ between strategies"
        times: dict[str, list[float]] = {"vanilla": [], "mslm": []}
        flops = flop_counts(trainers, batches[args.warmup : args.warmup + args.steps], args.warmup)
        masked = []
        for k, batch in enumerate(batches[: args.steps + args.warmup]):
            for name, trainer in trainers.items():
                if args.device == "cuda":
                    import torch

                    torch.cuda.synchronize()
                start = time.perf_counter()
                out = trainer.train_step(0, k, batch)
                if args.device == "cuda":
                    torch.cuda.synchronize()
                elapsed = time.perf_counter() - start
                if k >= args.warmup:
                    times[name].append(elapsed)
                    if name == "mslm":
                        masked.append(out.n_masked)
    ratios = [m / v for v, m in zip(times["vanilla"], times["mslm"], strict=True)]
    vanilla, mslm = statistics.median(times["vanilla"]), statistics.median(times["mslm"])
    figures = {
        "vanilla_step_s": round(vanilla, 4),
        "mslm_step_s": round(mslm, 4),
        "ratio": round(mslm / vanilla, 3),
    }
    emit(
        f"train_step-{args.device}",
        figures,
        {
            "steps": args.steps,
            "warmup": args.warmup,
            "batch_size": args.batch_size,
            "median_of_paired_ratios": round(statistics.median(ratios), 3),
            "mean_masked_tokens_per_batch": round(statistics.mean(masked), 1),
            "gflop_per_step": {k: round(v / len(masked) / 1e9, 2) for k, v in flops.items()},
            "flop_ratio": round(flops["mslm"] / flops["vanilla"], 3),
            "weights": trainers["mslm"].masking_info["weights"],
        },
    )


if __name__ == "__main__":
    main()
