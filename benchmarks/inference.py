"""Sentences/second: the usual `transformers` pipeline vs this engine (ONNX fp32, ONNX int8).

(a) what a user would otherwise deploy: ``pipeline("token-classification",
    aggregation_strategy="simple")``, batch 32, over the same encoder weights with a linear
    token-classification head (its F1 is meaningless; only its speed is measured);
(b) ``EntityExtractor`` with ONNX Runtime fp32 (16 windows per run); (c) the same with the
    int8 export as the engine runs it (one window per run: dynamic quantisation scales
    activations per run, so batching would make results depend on batch neighbours);
    and, for reference, int8 batched 16 windows per run.
All on the same sentences of the NCBI-disease test split (raw text in, entities out), each in
its own child process so that peak RSS is that engine's; thread counts are the runtimes'
defaults (all cores) for every contender. Also: strict F1 of (b) and (c) on those sentences,
and p50/p95 latency of one 30-word sentence through the default engine (int8). The engines
run with the ConText step on, as the service does; ``context_share`` is that step's time
(timed alone, on the entities the model found) over the whole annotate time.

    python benchmarks/inference.py --model runs/ncbi-disease [--limit 940] [--repeats 3]

A bundle without ONNX exports is exported (fp32 + int8) into a temporary copy first.
Targets (issue 3): fp32 ≥ 3× the pipeline, int8 ≥ 4.5×, int8 F1 within 0.5 points of fp32.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from common import DATA, emit

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

LATENCY_TEXT = (
    "A 58-year-old woman with a history of type 2 diabetes and hypertension presented with "
    "progressive renal failure after cisplatin chemotherapy for ovarian cancer, without signs "
    "of infection."
)  # 30 words


def peak_rss_mb() -> float:
    """This process's peak resident set (VmHWM). Not ru_maxrss: Linux carries that over from
    the parent across fork and exec, so every child would report the parent's peak."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def load_texts(data: str, limit: int, type_map: str | None = None):
    """The first ``limit`` sentences; with ``type_map`` ("Chemical=Drug,Disease=Problem": the
    clinical model's types for a corpus's), the gold types renamed and only those types scored
    (the model's other types — tests, anatomy — are not this corpus's to judge)."""
    from dataclasses import replace

    from mslm_core.corpus import read_corpus

    mapping = dict(pair.split("=", 1) for pair in type_map.split(",")) if type_map else None
    corpus = read_corpus(data, type_map=mapping)
    corpus.sentences = corpus.sentences[:limit]
    if mapping:
        kept = frozenset(mapping.values())
        corpus.sentences = [replace(s, annotated=kept) for s in corpus.sentences]
    return corpus, [" ".join(s.words) for s in corpus.sentences]


def timed(fn, repeats: int) -> float:
    """Median seconds of ``repeats`` runs of ``fn`` (after one warm-up run)."""
    fn()
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def latency_ms(fn, n: int = 200) -> tuple[float, float]:
    for _ in range(10):
        fn()
    samples = []
    for _ in range(n):
        start = time.perf_counter()
        fn()
        samples.append(1000 * (time.perf_counter() - start))
    samples.sort()
    return statistics.median(samples), samples[int(0.95 * (len(samples) - 1))]


def run_pipeline(args) -> dict:
    """The usual deployment: a transformers token-classification pipeline."""
    import torch
    from transformers import AutoModelForTokenClassification, AutoTokenizer, pipeline

    from mslm_core.bundle import load_bundle

    bundle = load_bundle(args.model)
    types = bundle.manifest["types"]
    labels = ["O"] + [f"{p}-{t}" for t in types for p in ("B", "I")]
    with tempfile.TemporaryDirectory() as tmp:
        config = bundle.model.mlm_model.config
        config.num_labels = len(labels)
        config.id2label = dict(enumerate(labels))
        config.label2id = {label: i for i, label in enumerate(labels)}
        model = AutoModelForTokenClassification.from_config(config)
        encoder = bundle.model.mlm_model.base_model
        model.base_model.load_state_dict(encoder.state_dict())  # the same encoder weights
        model.save_pretrained(tmp)
        bundle.tokenizer.save_pretrained(tmp)
        del bundle, model
        tok = AutoTokenizer.from_pretrained(tmp)
        clf = AutoModelForTokenClassification.from_pretrained(tmp).eval()
    pipe = pipeline(
        "token-classification",
        model=clf,
        tokenizer=tok,
        aggregation_strategy="simple",
        device=-1,
    )
    _, texts = load_texts(args.data, args.limit)
    with torch.inference_mode():
        seconds = timed(lambda: pipe(texts, batch_size=32), args.repeats)
        p50, p95 = latency_ms(lambda: pipe([LATENCY_TEXT], batch_size=1), args.latency_runs)
    return {
        "sps": len(texts) / seconds,
        "seconds": seconds,
        "p50_ms": p50,
        "p95_ms": p95,
        "threads": torch.get_num_threads(),
        "peak_rss_mb": peak_rss_mb(),
    }


def run_engine(args, precision: str, batch_size: int | None) -> dict:
    from mslm_core.context import ContextEngine
    from mslm_core.evaluate import predict_mentions, score_predictions
    from mslm_core.pipeline import AnnotationPipeline

    engine = AnnotationPipeline.from_bundle(
        args.model,
        backend="onnx",
        precision=precision,
        device="cpu",
        batch_size=batch_size,
        context=ContextEngine.default(),  # as the service runs it (MSLM_CONTEXT on)
    )
    context = engine.context
    assert context is not None
    corpus, texts = load_texts(args.data, args.limit, args.type_map)
    seconds = timed(lambda: engine(texts), args.repeats)  # with the ConText step
    p50, p95 = latency_ms(lambda: engine([LATENCY_TEXT]), args.latency_runs)
    report = score_predictions(corpus, predict_mentions(engine.extractor.predictor, corpus))
    # the ConText step alone, on the entities the model found (it runs after the model)
    entities = engine.extractor.annotate(texts)
    context_seconds = timed(lambda: context.apply_all(texts, entities), args.repeats)
    one = engine.extractor.annotate([LATENCY_TEXT])
    context_p50, _ = latency_ms(lambda: context.apply_all([LATENCY_TEXT], one), args.latency_runs)
    n_entities = sum(len(e) for e in entities)
    return {
        "context_seconds": context_seconds,
        "context_share": context_seconds / seconds,
        "context_p50_ms": context_p50,
        "sps": len(texts) / seconds,
        "seconds": seconds,
        "p50_ms": p50,
        "p95_ms": p95,
        "f1": report["strict"]["f1"],
        "entities": n_entities,
        "provider": engine.info.provider,
        "batch_size": engine.extractor.predictor.batch_size,
        "peak_rss_mb": peak_rss_mb(),
    }


CONTENDERS = {  # name → (precision, windows per run; None: the engine's default)
    "fp32": ("fp32", None),
    "int8": ("int8", None),
    "int8-batched": ("int8", 16),
}


def child(args) -> None:
    if args.only == "pipeline":
        out = run_pipeline(args)
    else:
        out = run_engine(args, *CONTENDERS[args.only])
    print(json.dumps(out))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", required=True, help="a trained bundle")
    ap.add_argument("--data", default=str(DATA / "NCBI-disease-IOB" / "test.tsv"))
    ap.add_argument("--limit", type=int, default=940, help="sentences (940: the whole split)")
    ap.add_argument("--repeats", type=int, default=3, help="timed runs per round (median)")
    ap.add_argument("--rounds", type=int, default=3, help="interleaved rounds (median)")
    ap.add_argument("--latency-runs", type=int, default=200)
    ap.add_argument(
        "--type-map",
        help="the model's types for the data's, e.g. Chemical=Drug,Disease=Problem (the clinical "
        "model on BC5CDR): F1 on those types only",
    )
    ap.add_argument("--only", choices=["pipeline", *CONTENDERS], help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.only:
        child(args)
        return

    from mslm_core.bundle import read_manifest
    from mslm_core.export import export_bundle

    tmp = None
    model = Path(args.model)
    precisions = (read_manifest(model).get("onnx") or {}).get("precisions", {})
    if not {"fp32", "int8"} <= set(precisions):
        tmp = tempfile.mkdtemp(prefix="mslm-bench-")
        model = Path(tmp) / "bundle"
        shutil.copytree(args.model, model)
        print("exporting fp32 + int8 into a temporary copy", file=sys.stderr)
        export_bundle(model, quantize="int8")
    rounds: dict[str, list[dict]] = {name: [] for name in ("pipeline", *CONTENDERS)}
    try:
        # contenders interleaved, round after round: machine noise hits all alike
        for _ in range(args.rounds):
            for name in rounds:
                cmd = [
                    sys.executable,
                    __file__,
                    "--model",
                    str(model),
                    "--only",
                    name,
                    "--data",
                    args.data,
                    "--limit",
                    str(args.limit),
                    "--repeats",
                    str(args.repeats),
                    "--latency-runs",
                    str(args.latency_runs),
                    *(["--type-map", args.type_map] if args.type_map else []),
                ]
                proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
                if proc.returncode:
                    sys.stderr.write(proc.stderr)
                    raise SystemExit(f"{name} failed")
                rounds[name].append(json.loads(proc.stdout.strip().splitlines()[-1]))
                print(name, rounds[name][-1], file=sys.stderr)
    finally:
        if tmp:
            shutil.rmtree(tmp, ignore_errors=True)
    # per contender: the round with the median throughput (its latency and memory with it)
    results = {
        name: sorted(runs, key=lambda r: r["sps"])[len(runs) // 2] for name, runs in rounds.items()
    }
    pipe = results["pipeline"]["sps"]
    figures = {
        "pipeline_sps": round(pipe, 1),
        "fp32_sps": round(results["fp32"]["sps"], 1),
        "int8_sps": round(results["int8"]["sps"], 1),
        "fp32_speedup": round(results["fp32"]["sps"] / pipe, 2),
        "int8_speedup": round(results["int8"]["sps"] / pipe, 2),
        "f1": {k: round(results[k]["f1"], 4) for k in ("fp32", "int8")},
        "p50_ms": round(results["int8"]["p50_ms"], 2),
        "p95_ms": round(results["int8"]["p95_ms"], 2),
        "peak_rss_mb": round(results["int8"]["peak_rss_mb"], 1),
        # the ConText step's share of annotate time (target ≤ 10 %), default engine
        "context_share": round(results["int8"]["context_share"], 4),
        "context_p50_ms": round(results["int8"]["context_p50_ms"], 3),
    }
    details = {
        "sentences": args.limit,
        "data": args.data,
        "model": str(args.model),
        "per_engine": results,
        "sps_per_round": {
            name: [round(r["sps"], 1) for r in runs] for name, runs in rounds.items()
        },
        "int8_batched_speedup": round(results["int8-batched"]["sps"] / pipe, 2),
        "note": "p50/p95/peak RSS of the headline: the default engine (ONNX int8, one window "
        "per run, so that a text's result never depends on its batch neighbours); "
        "int8-batched (16 windows per run) is faster but batch-dependent; each engine's own "
        "figures are in per_engine",
    }
    emit("inference-cpu", figures, details)


if __name__ == "__main__":
    main()
