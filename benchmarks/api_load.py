"""Texts/second through POST /v1/annotate at 1, 8 and 32 concurrent clients on loopback, and
the same engine's offline throughput, in one run.

A fresh install in a temporary MSLM_HOME imports the bundle (``mslm import-model``), serves it
with ``mslm serve`` (``--processes`` API processes, MSLM_API_PROCESSES: one by default; the
engine's default precision: int8 on CPU when exported),
and keep-alive clients send the NCBI-disease test sentences, one text per request, for
``--duration`` seconds per level: ``--client wrk`` (Debian's wrk, one C thread, a Lua script
cycling through the texts; the default when it is installed) or ``aiohttp`` (asyncio clients in
this Python process). The clients share the machine's cores with the server, so their own CPU
time is measured too (``client_cpu_share``: of all the cores, over the run): on 2 cores the
Python clients took a share the server then lacks, which no deployment's remote clients take.
Offline: the engine (in as many processes as the API has, side by side, each on every
text: with one, in this process) annotating the same sentences in one call with the steps
the service runs (the clinical context and the packaged vocabulary's concepts, the service's
defaults), its answer rendered as the API renders it (the language check, relations and facts)
and written as JSON (0.18 ms a text on the first start's model, 7 % of the engine's time);
the model alone beside it. Also: API process RSS before and after, latency percentiles.
Targets: at 32 clients ≥ 80 % of the offline throughput of the same steps (issue 54), zero
errors.

    python benchmarks/api_load.py --model BUNDLE [--duration 20] [--texts-per-request 1]
        [--levels 1,8,32] [--warmup 2] [--client wrk|aiohttp] [--runs 3] [--processes 1]

A bundle without ONNX exports is exported (fp32 + int8) into a temporary copy first.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import resource
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from functools import partial
from pathlib import Path
from typing import Any

from common import DATA, emit, exit_on_sigterm, int8_bundle

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
KEY = "bench-admin-key-0123456789abcdef"


def rss_mb(group: int) -> float:
    """The resident memory of process group ``group`` (the server and its processes)."""
    total = 0.0
    for proc in Path("/proc").iterdir():
        try:
            if not proc.name.isdigit() or os.getpgid(int(proc.name)) != group:
                continue
            for line in (proc / "status").read_text().splitlines():
                if line.startswith("VmRSS:"):
                    total += int(line.split()[1]) / 1024
        except (OSError, ProcessLookupError):
            continue  # gone meanwhile
    return total or float("nan")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


async def load(port: int, texts: list[str], clients: int, per_request: int, duration: float):
    """``clients`` concurrent keep-alive connections (aiohttp: the leanest Python client,
    so that the load generator takes as little as it can of the cores the server needs)."""
    import aiohttp

    latencies: list[float] = []
    errors = 0
    done_texts = 0
    stop_at = time.perf_counter() + duration
    headers = {"Authorization": f"Bearer {KEY}"}
    url = f"http://127.0.0.1:{port}/v1/annotate"
    connector = aiohttp.TCPConnector(limit=clients)
    async with aiohttp.ClientSession(
        connector=connector, timeout=aiohttp.ClientTimeout(total=60)
    ) as session:

        async def worker(offset: int) -> None:
            nonlocal errors, done_texts
            i = offset
            while time.perf_counter() < stop_at:
                batch = [texts[(i + k) % len(texts)] for k in range(per_request)]
                i += per_request * clients
                start = time.perf_counter()
                try:
                    async with session.post(url, json={"texts": batch}, headers=headers) as r:
                        await r.read()
                        ok = r.status == 200
                except aiohttp.ClientError:
                    ok = False
                latencies.append(time.perf_counter() - start)
                if ok:
                    done_texts += len(batch)
                else:
                    errors += 1

        started, cpu = time.perf_counter(), time.process_time()
        await asyncio.gather(*(worker(c * per_request) for c in range(clients)))
        elapsed, cpu = time.perf_counter() - started, time.process_time() - cpu
    latencies.sort()

    def pct(p: float) -> float:
        return 1000 * latencies[min(len(latencies) - 1, int(p * len(latencies)))]

    return {
        "texts_per_s": done_texts / elapsed,
        "requests": len(latencies),
        "errors": errors,
        "p50_ms": pct(0.50),
        "p95_ms": pct(0.95),
        "p99_ms": pct(0.99),
        "client_cpu_share": round(cpu / (elapsed * (os.cpu_count() or 1)), 3),
    }


WRK_SCRIPT = """
wrk.method = "POST"
wrk.headers["Content-Type"] = "application/json"
wrk.headers["Authorization"] = "Bearer %(key)s"
local bodies = {}
for line in io.lines("%(bodies)s") do bodies[#bodies + 1] = line end
local i = 0
request = function()
  i = i + 1
  return wrk.format(nil, "/v1/annotate", nil, bodies[(i %% #bodies) + 1])
end
done = function(summary, latency, requests)
  io.write(string.format("MSLM %%d %%d %%d %%d %%f %%f %%f\\n", summary.requests,
    summary.errors.status + summary.errors.connect + summary.errors.read
    + summary.errors.write + summary.errors.timeout, summary.duration, 0,
    latency:percentile(50) / 1000, latency:percentile(95) / 1000, latency:percentile(99) / 1000))
end
"""


def load_wrk(
    port: int, texts: list[str], clients: int, per_request: int, duration: float, tmp: Path
) -> dict:
    """``clients`` keep-alive connections from wrk (one thread), each request the next
    ``per_request`` texts as one JSON body."""
    bodies = tmp / "bodies.txt"
    if not bodies.exists():
        groups = [texts[i : i + per_request] for i in range(0, len(texts), per_request)]
        bodies.write_text("\n".join(json.dumps({"texts": g}) for g in groups) + "\n")
    script = tmp / "post.lua"
    script.write_text(WRK_SCRIPT % {"key": KEY, "bodies": bodies})
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    done = subprocess.run(
        [
            "wrk",
            "-t1",
            f"-c{clients}",
            f"-d{max(1, round(duration))}s",
            "-s",
            str(script),
            f"http://127.0.0.1:{port}",
        ],
        capture_output=True,
        text=True,
        check=True,
    )
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    line = next(x for x in done.stdout.splitlines() if x.startswith("MSLM "))
    requests, errors, micros, _, p50, p95, p99 = line.split()[1:]
    elapsed = int(micros) / 1e6
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    ok = int(requests) - int(errors)
    return {
        "texts_per_s": ok * per_request / elapsed,
        "requests": int(requests),
        "errors": int(errors),
        "p50_ms": float(p50),
        "p95_ms": float(p95),
        "p99_ms": float(p99),
        "client_cpu_share": round(cpu / (elapsed * (os.cpu_count() or 1)), 3),
    }


def _offline(annotate, texts: list[str], barrier: Any = None) -> list[float]:
    """Seconds of each of 3 calls on every text after a warm-up (each call started together
    with the other processes' when ``barrier`` is given)."""
    annotate(texts[:64])
    times = []
    for _ in range(3):
        if barrier is not None:
            barrier.wait()
        start = time.perf_counter()
        annotate(texts)
        times.append(time.perf_counter() - start)
    return times


def _rate(texts: list[str], times_by_process: list[list[float]]) -> float:
    """Texts per second of the processes together: each round's time is its slowest
    process's; the median round."""
    rounds = [max(t) for t in zip(*times_by_process, strict=True)]
    return len(texts) * len(times_by_process) / statistics.median(rounds)


def _engine(bundle: Path, threads: int | None) -> Any:
    """The engine with the steps the API runs, as the API configures it."""
    from mslm_core.context import ContextEngine
    from mslm_core.linking.builtin import DEFAULT_VOCABULARY, load_linker
    from mslm_core.pipeline import AnnotationPipeline
    from mslm_settings import Settings

    return AnnotationPipeline.from_bundle(
        bundle,
        context=ContextEngine.default(),
        linker=load_linker(DEFAULT_VOCABULARY),
        intra_op_threads=Settings().intra_op_threads if threads is None else threads,
    )


def _offline_times(
    bundle: Path, threads: int | None, texts: list[str], barrier: Any = None
) -> tuple[list[float], list[float], Any]:
    """One offline engine's times for the answer's steps, then for the model alone, and its
    info (each call started with the other processes' when ``barrier`` is given)."""
    engine = _engine(bundle, threads)
    return (
        _offline(partial(_answer, engine), texts, barrier),
        _offline(engine.extractor.annotate, texts, barrier),
        engine.info,
    )


def _offline_process(
    bundle: Path, threads: int | None, texts: list[str], barrier: Any, out: Any
) -> None:
    """One of ``--processes`` offline engines: :func:`_offline_times`, put on ``out``."""
    out.put(_offline_times(bundle, threads, texts, barrier))


def offline_rates(
    bundle: Path, threads: int | None, texts: list[str], processes: int
) -> tuple[float, float, Any]:
    """Texts/s offline of the answer's steps and of the model alone, in ``processes``
    processes side by side (this one when 1), and the engine's info."""
    if processes == 1:
        results = [_offline_times(bundle, threads, texts)]
    else:
        import multiprocessing

        ctx = multiprocessing.get_context("spawn")
        barrier, out = ctx.Barrier(processes), ctx.Queue()
        children = [
            ctx.Process(target=_offline_process, args=(bundle, threads, texts, barrier, out))
            for _ in range(processes)
        ]
        for child in children:
            child.start()
        results = [out.get(timeout=1800) for _ in children]
        for child in children:
            child.join()
    return (
        _rate(texts, [answer for answer, _, _ in results]),
        _rate(texts, [model for _, model, _ in results]),
        results[0][2],
    )


def _answer(engine: Any, batch: list[str]) -> bytes:
    """What the API computes for each text, offline: the entities, then the answer rendered
    (its language check, relations, facts) and written as JSON."""
    return json.dumps(engine.render(batch, engine(batch)).body).encode()


def one_run(args: argparse.Namespace, bundle: Path, texts: list[str], port: int, tmp: Path) -> dict:
    """The engine offline (the steps the API runs: context and linking with their defaults,
    the answer rendered and written as JSON; and the model alone), then the API at each level
    of clients."""
    offline, model_only, info = offline_rates(bundle, args.intra_op_threads, texts, args.processes)
    levels = {}
    for clients in (int(c) for c in args.levels.split(",")):
        for seconds, keep in ((args.warmup, False), (args.duration, True)):
            if args.client == "wrk":
                run = load_wrk(port, texts, clients, args.texts_per_request, seconds, tmp)
            else:
                run = asyncio.run(load(port, texts, clients, args.texts_per_request, seconds))
            if keep:
                levels[str(clients)] = run
        print(clients, levels[str(clients)], file=sys.stderr)
    top = levels.get("32", levels[max(levels, key=int)])
    return {
        "offline": offline,
        "model_only": model_only,
        "info": info,
        "levels": levels,
        "ratio_32": round(top["texts_per_s"] / offline, 3),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", required=True, help="a trained bundle")
    ap.add_argument("--data", default=str(DATA / "NCBI-disease-IOB" / "test.tsv"))
    ap.add_argument("--duration", type=float, default=20.0, help="seconds per level")
    ap.add_argument("--texts-per-request", type=int, default=1)
    ap.add_argument("--levels", default="1,8,32")
    ap.add_argument("--warmup", type=float, default=2.0, help="seconds of warm-up per level")
    ap.add_argument(
        "--client",
        choices=["wrk", "aiohttp"],
        default="wrk" if shutil.which("wrk") else "aiohttp",
        help="the load generator (default: wrk when installed)",
    )
    ap.add_argument(
        "--runs", type=int, default=3, help="runs of it all (the median ratio's is reported)"
    )
    ap.add_argument(
        "--intra-op-threads",
        type=int,
        default=None,
        help="ONNX Runtime threads per run, for the API (MSLM_INTRA_OP_THREADS) and the engine "
        "offline alike (default: the deployment default)",
    )
    ap.add_argument(
        "--processes",
        type=int,
        default=1,
        help="API processes (mslm serve --workers; MSLM_API_PROCESSES in the compose stack) "
        "and offline engine processes alike (default 1)",
    )
    args = ap.parse_args()
    exit_on_sigterm()

    from mslm_core.corpus import read_corpus

    texts = [" ".join(s.words) for s in read_corpus(args.data).sentences]
    tmp = Path(tempfile.mkdtemp(prefix="mslm-load-"))
    try:
        bundle = int8_bundle(args.model, tmp)
        env = {
            **os.environ,
            "MSLM_HOME": str(tmp / "home"),
            "MSLM_API_KEYS": f"{KEY}:admin",
            "MSLM_DATABASE_URL": "",
            "MSLM_BROKER_URL": "",
        }
        if args.intra_op_threads is not None:
            env["MSLM_INTRA_OP_THREADS"] = str(args.intra_op_threads)
        subprocess.run(
            [sys.executable, "-m", "mslm_core.cli", "import-model", str(bundle), "--activate"],
            env=env,
            check=True,
            capture_output=True,
        )
        port = free_port()
        with open(tmp / "api.log", "wb") as log:  # the child keeps its own descriptor
            server = subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "mslm_core.cli",
                    "serve",
                    "--port",
                    str(port),
                    "--workers",
                    str(args.processes),
                ],
                env=env,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        try:
            import httpx

            deadline = time.time() + 120
            while True:
                try:
                    if httpx.get(f"http://127.0.0.1:{port}/readyz").status_code == 200:
                        break
                except httpx.HTTPError:
                    pass
                if time.time() > deadline or server.poll() is not None:  # or it has exited
                    raise SystemExit((tmp / "api.log").read_text()[-2000:])
                time.sleep(0.5)
            rss_start = rss_mb(server.pid)
            runs = []
            for _ in range(args.runs):  # the engine offline, then the API, in turn
                runs.append(one_run(args, bundle, texts, port, tmp))
                print(runs[-1]["ratio_32"], file=sys.stderr)
            rss_end = rss_mb(server.pid)
        finally:
            os.killpg(server.pid, signal.SIGTERM)
            server.wait(timeout=30)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    # the run of the median ratio (an odd number of runs: its own figures)
    run = sorted(runs, key=lambda r: r["ratio_32"])[len(runs) // 2]
    levels, offline, model_only, info = (
        run["levels"],
        run["offline"],
        run["model_only"],
        run["info"],
    )
    top = levels[max(levels, key=int)]
    figures = {
        "offline_sps": round(offline, 1),
        "offline_model_only_sps": round(model_only, 1),
        "api_sps": {k: round(v["texts_per_s"], 1) for k, v in levels.items()},
        "ratio_32": run["ratio_32"],
        "ratio_32_runs": [r["ratio_32"] for r in runs],
        "errors": sum(v["errors"] for v in levels.values()),
        "p50_ms": round(top["p50_ms"], 1),
        "p95_ms": round(top["p95_ms"], 1),
        "p99_ms": round(top["p99_ms"], 1),
        "client": args.client,
        "client_cpu_share_32": levels.get("32", top)["client_cpu_share"],
        "processes": args.processes,
    }
    name = "api_load-cpu" if args.client == "wrk" else "api_load-cpu-aiohttp"
    emit(
        name if args.processes == 1 else f"{name}-{args.processes}-processes",
        figures,
        {
            "levels": levels,
            "texts_per_request": args.texts_per_request,
            "duration_s": args.duration,
            "engine": {
                "backend": info.backend,
                "precision": info.precision,
                "provider": info.provider,
                "intra_op_threads": args.intra_op_threads,
            },
            "api_rss_mb": {"start": round(rss_start, 1), "end": round(rss_end, 1)},
            "note": "p50/p95/p99 at the highest concurrency; clients and server share the "
            "machine's cores",
        },
    )


if __name__ == "__main__":
    main()
