"""Every benchmark script runs, small: each one as a subprocess with tiny settings (a tiny
random encoder, tiny corpora made here, a few steps, fractions of a second of load), so that
each figure the README and docs/ quote can be made again by the code as it is today.

A run must exit 0, print its figures as one JSON object on its last line (the house rule) and
write them into a temporary results folder (``MSLM_BENCH_RESULTS``, or the script's own
``--out``/``--results``), never over the committed files under ``benchmarks/results/``. A
script under ``benchmarks/`` with no run here fails :func:`test_every_script_has_a_run`; a
protocol with none fails :func:`test_every_protocol_has_a_run`. The clinical corpora are
tiny documents laid out as the pinned corpus cache holds them (``mslm_core.corpora``), so that
no test reads the network or the shared corpora folder.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
import zipfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from conftest import TOY_CONLL, toy_config

from mslm_core.bundle import verify_bundle

REPO = Path(__file__).resolve().parents[1]
BENCHMARKS = REPO / "benchmarks"
PROTOCOLS = BENCHMARKS / "protocols"
PG_ADMIN = os.environ.get("MSLM_TEST_PG", "postgresql://postgres@127.0.0.1:5432/postgres")
REDIS = os.environ.get("MSLM_TEST_REDIS", "redis://127.0.0.1:6379")

# The files of benchmarks/ that are imported by the scripts, not run.
HELPERS = {"common.py": "the scripts' results files and last-line JSON"}
# Scripts that are not run here, and why (keep this short: a script with no run rots).
EXEMPT = {
    "context_baselines.py": "not a benchmark of its own: assertion.py --baselines runs it inside "
    "the virtual environments it makes from PyPI for medspaCy 1.3.1 (spaCy < 3.8) and negspacy "
    "1.1.0 (spaCy >= 3.8), which this environment does not hold and cannot share",
}


# -- tiny inputs ------------------------------------------------------------------------------
@pytest.fixture(scope="session")
def data(tmp_path_factory) -> Path:
    """A data root with a tiny IOB folder (train, devel, test) for every dataset a protocol
    names and for the NCBI-disease defaults of the scripts."""
    from harness import load_protocol
    from harness.protocol import dataset_folder

    root = tmp_path_factory.mktemp("bench-data")
    folders = {"NCBI-disease-IOB"}
    for path in PROTOCOLS.glob("*.toml"):
        folders.update(dataset_folder(d) for d in load_protocol(path).datasets)
    for name in folders:
        (root / name).mkdir()
        for split in ("train", "devel", "test"):
            (root / name / f"{split}.tsv").write_text(TOY_CONLL, encoding="utf-8")
    return root


@pytest.fixture(scope="session")
def bundle(tmp_path_factory, toy_corpus, tiny_encoder) -> Path:
    """A vanilla bundle of the tiny encoder with its ONNX exports (fp32 and int8)."""
    from mslm_core.export import export_bundle
    from mslm_core.train import Trainer

    path = tmp_path_factory.mktemp("bench-bundle") / "vanilla"
    Trainer(toy_config(toy_corpus, tiny_encoder, epochs=2, strategy="vanilla"), path).fit()
    export_bundle(path, quantize="int8")
    return path


@pytest.fixture(scope="session")
def mslm_bundle(tmp_path_factory, toy_corpus, tiny_encoder) -> Path:
    """An MSLM bundle (the leaky protocol's path)."""
    from mslm_core.train import Trainer

    path = tmp_path_factory.mktemp("bench-bundle") / "mslm"
    Trainer(toy_config(toy_corpus, tiny_encoder, epochs=2, strategy="mslm"), path).fit()
    return path


def _brat(text: str, spans: list[tuple[str, str]], extra: Callable[[dict], list[str]]) -> str:
    """brat standoff: a text-bound annotation per (type, words) — each words once in the
    text — then the lines ``extra`` makes from their ids (``{words: T<n>}``)."""
    lines, ids = [], {}
    for n, (kind, words) in enumerate(spans, start=1):
        start = text.index(words)
        ids[words] = f"T{n}"
        lines.append(f"T{n}\t{kind} {start} {start + len(words)}\t{words}")
    return "\n".join(lines + extra(ids)) + "\n"


MACCROBAT_TEXT = (
    "A 60-year-old man with a history of diabetes presented with fever and cough.\n"
    "He denied chest pain.\n"
    "Aspirin 81 mg was given and a biopsy of the liver showed cancer.\n"
)
MACCROBAT_ANN = _brat(
    MACCROBAT_TEXT,
    [
        ("History", "history of diabetes"),
        ("Disease_disorder", "diabetes"),
        ("Sign_symptom", "fever"),
        ("Sign_symptom", "cough"),
        ("Sign_symptom", "chest pain"),
        ("Medication", "Aspirin"),
        ("Dosage", "81 mg"),
        ("Diagnostic_procedure", "biopsy"),
        ("Biological_structure", "liver"),
        ("Disease_disorder", "cancer"),
    ],
    lambda t: [
        f"E1\tDisease_disorder:{t['diabetes']} ",
        f"E2\tSign_symptom:{t['fever']} ",
        f"E3\tSign_symptom:{t['cough']} ",
        f"E4\tSign_symptom:{t['chest pain']} ",
        f"E5\tDisease_disorder:{t['cancer']} ",
        "A1\tPOLARITY E4 NEG",
        "A2\tPOLARITY E5 UNCERTAIN",
        f"R1\tMODIFY Arg1:{t['81 mg']} Arg2:{t['Aspirin']}",
        f"R2\tMODIFY Arg1:{t['liver']} Arg2:{t['biopsy']}",
    ],
)
CHIA_TEXT = {
    "inc": "Patients with diabetes\nTaking aspirin daily\n",
    "exc": "No history of cancer or asthma\nPossible pneumonia\n",
}
CHIA_ANN = {
    "inc": _brat(CHIA_TEXT["inc"], [("Condition", "diabetes"), ("Drug", "aspirin")], lambda t: []),
    "exc": _brat(
        CHIA_TEXT["exc"],
        [
            ("Negation", "No"),
            ("Temporal", "history"),
            ("Condition", "cancer"),
            ("Condition", "asthma"),
            ("Scope", "cancer or asthma"),
            ("Mood", "Possible"),
            ("Condition", "pneumonia"),
        ],
        lambda t: [
            f"R1\tHas_negation Arg1:{t['cancer or asthma']} Arg2:{t['No']}\t",
            f"R2\tHas_temporal Arg1:{t['cancer']} Arg2:{t['history']}\t",
            f"R3\tHas_mood Arg1:{t['pneumonia']} Arg2:{t['Possible']}\t",
        ],
    ),
}
# PubTator documents: (title, abstract, [(words, type, concept id)])
PUBTATOR = [
    (
        "Aspirin reduces fever in breast cancer.",
        "No sign of diabetes or cancer today; cisplatin caused renal failure.",
        [
            ("Aspirin", "Chemical", "D001241"),
            ("fever", "Disease", "D005334"),
            ("breast cancer", "Disease", "D001943"),
            ("diabetes", "Disease", "D003920"),
            ("cancer", "Disease", "D009369"),
            ("cisplatin", "Chemical", "D002945"),
            ("renal failure", "Disease", "D051437"),
        ],
    ),
    (
        "The patient has breast cancer.",
        "Cisplatin caused renal failure and fever in the patient.",
        [
            ("breast cancer", "Disease", "D001943"),
            ("Cisplatin", "Chemical", "D002945"),
            ("renal failure", "Disease", "D051437"),
            ("fever", "Disease", "D005334"),
        ],
    ),
]


def _pubtator(first_pmid: int) -> str:
    out = []
    for k, (title, abstract, mentions) in enumerate(PUBTATOR):
        pmid = first_pmid + k
        text = f"{title} {abstract}"
        out += [f"{pmid}|t|{title}", f"{pmid}|a|{abstract}"]
        at = 0
        for words, kind, concept in mentions:
            start = text.index(words, at)
            at = start + len(words)
            out.append(f"{pmid}\t{start}\t{at}\t{words}\t{kind}\t{concept}")
        out.append("")
    return "\n".join(out) + "\n"


@pytest.fixture(scope="session")
def corpus_cache(tmp_path_factory) -> Path:
    """Tiny documents in the layout of the pinned corpus cache (every pinned file present,
    stamped with the pinned commit), for the corpora the benchmarks read: MACCROBAT2020 and
    CHIA (brat), the BLURB IOB folders, BioScope's clinical part with the CMC reports, and the
    PubTator releases of NCBI-disease and BC5CDR."""
    from test_clinical_corpora import ANON, CMC

    from harness.context_corpora import BIOSCOPE_FILE, CMC_FILES
    from mslm_core.corpora import clinical, corpora

    cache = tmp_path_factory.mktemp("bench-corpora")
    contents: dict[str, dict[str, str]] = {
        "MACCROBAT2020": {
            path: MACCROBAT_ANN if path.endswith(".ann") else MACCROBAT_TEXT
            for path in corpora()["MACCROBAT2020"].files
        },
        "BioScope-clinical-anon": {BIOSCOPE_FILE: ANON},
        "CMC2007": {CMC_FILES[0]: CMC, CMC_FILES[1]: "<docs></docs>\n"},
        "NCBI-disease-original": {
            "original-data/train/NCBItrainset_corpus.txt": _pubtator(100),
            "original-data/devel/NCBIdevelopset_corpus.txt": _pubtator(200),
            "original-data/test/NCBItestset_corpus.txt": _pubtator(300),
            "original-data/LICENSE": "public domain\n",
        },
        "BC5CDR-original": {
            f"CDR_Data/CDR.Corpus.v010516/CDR_{split}Set.PubTator.txt": _pubtator(first)
            for split, first in (("Training", 100), ("Development", 200), ("Test", 300))
        },
    }
    for name in ("BC5CDR-IOB", "NCBI-disease-IOB"):
        contents[name] = {path: TOY_CONLL for path in corpora()[name].files}
    # CHIA: two trials of each split, their criteria files beside the pinned zip of them
    trials = [t for split in ("train", "dev", "test") for t in clinical.splits()["CHIA"][split][:2]]
    chia = {
        f"chia_with_scope/{trial}_{part}.{ext}": (CHIA_ANN if ext == "ann" else CHIA_TEXT)[part]
        for trial in trials
        for part in ("inc", "exc")
        for ext in ("txt", "ann")
    }
    contents["CHIA"] = chia
    for name, files in contents.items():
        corpus = corpora()[name]
        root = corpus.root(cache)
        for path, text in files.items():
            (root / path).parent.mkdir(parents=True, exist_ok=True)
            (root / path).write_text(text, encoding="utf-8")
        if name == "CHIA":
            with zipfile.ZipFile(root / "chia_with_scope.zip", "w") as archive:
                for path, text in files.items():
                    archive.writestr(path, text)
        assert all((root / path).is_file() for path in corpus.files), name
        (root / ".complete").write_text(corpus.commit + "\n", encoding="utf-8")
    return cache


def _unavailable(services: tuple[str, ...]) -> list[str] | None:
    """What of ``services`` (``postgres``, ``redis``) this machine's servers do not answer
    for, or None when all answer."""
    problems = []
    if "postgres" in services:
        import psycopg

        try:
            psycopg.connect(PG_ADMIN, connect_timeout=3).close()
        except psycopg.OperationalError as exc:
            problems.append(f"PostgreSQL: {exc}")
    if "redis" in services:
        import redis

        try:
            redis.Redis.from_url(REDIS, socket_connect_timeout=3).ping()
        except redis.RedisError as exc:
            problems.append(f"Redis: {exc}")
    return problems or None


def _first_start_served_both(figures: dict) -> None:
    """The early model was served before the full one, and both jobs estimated their time
    left (the tiny encoder's runs are too short to judge the estimates: only that they were
    made and scored)."""
    verify_bundle(figures["bundle"])
    assert figures["minutes_to_early"] <= figures["minutes_to_served"]
    assert set(figures["estimate_worst_error"]) == {"early", "full"}


def _rerank_chosen_on_dev(figures: dict) -> None:
    """The weight chosen is the grid's best on dev, and the test files were linked at it."""
    pooled = figures["dev_accuracy_at_1_pooled"]
    assert pooled[f"{figures['chosen_weight']:g}"] == max(pooled.values())
    for rows in figures["test"].values():
        assert set(rows) == {"TF-IDF alone", f"weight {figures['chosen_weight']:g}"}


def _scanned_words_mended(figures: dict) -> None:
    assert figures["scanned_notes_words_changed"] > 200  # the check set's scanned notes
    assert figures["sources_missing"] == []


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _drop_database(url: str) -> None:
    import psycopg

    name = url.rsplit("/", 1)[1]
    with psycopg.connect(PG_ADMIN, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


# -- the runs ---------------------------------------------------------------------------------
@dataclass(frozen=True)
class Run:
    """One script's tiny run: its arguments (from the fixtures in ``needs``, the run's
    ``results`` folder and a ``work`` folder) and the file it writes under ``results``."""

    script: str
    argv: Callable[[Any], list[str]]
    writes: str | None
    needs: tuple[str, ...] = ()
    services: tuple[str, ...] = ()  # "postgres", "redis"
    after: Callable[[dict[str, Any]], None] | None = None  # cleans up what the run leaves
    cost: int = 10  # about how many seconds it takes alone on 2 cores (the longest start first)
    protocol: str | None = None  # the protocol of benchmarks/protocols it runs


def _test_split(t: Any) -> str:
    return str(t.data / "NCBI-disease-IOB" / "test.tsv")


def _protocol(name: str, cost: int, script: str = "reproduce.py") -> Run:
    head = ["run"] if script == "bench.py" else []
    return Run(
        script,
        lambda t: [
            *head,
            name,
            "--smoke",
            "--base-model",
            str(t.tiny_encoder),
            "--data",
            str(t.data),
            "--device",
            "cpu",
            "--results",
            str(t.results),
            "--work",
            str(t.work),
        ],
        f"{name}-smoke/summary.json",
        needs=("tiny_encoder", "data"),
        cost=cost,
        protocol=name,
    )


def _api_load_args(t: Any, levels: str) -> list[str]:
    """api_load.py for a moment at ``levels`` clients, aiohttp's (wrk may be absent)."""
    return [
        *("--model", str(t.bundle), "--data", _test_split(t), "--levels", levels),
        *("--duration", "0.5", "--warmup", "0.2", "--client", "aiohttp", "--runs", "1"),
    ]


RUNS: dict[str, Run] = {
    "active_learning": Run(
        "active_learning.py",
        lambda t: [
            "--smoke",
            "--corpora",
            "NCBI-disease",
            "--base-model",
            str(t.tiny_encoder),
            "--data",
            str(t.data),
            "--device",
            "cpu",
            "--results",
            str(t.results / "active_learning"),
        ],
        "active_learning/summary.json",
        needs=("tiny_encoder", "data"),
        cost=30,
    ),
    "api_load": Run(
        "api_load.py",
        lambda t: _api_load_args(t, "1,2"),
        "api_load-cpu-aiohttp.json",
        needs=("bundle", "data"),
        cost=30,
    ),
    "api_load_processes": Run(
        "api_load.py",
        lambda t: [*_api_load_args(t, "2"), "--processes", "2"],
        "api_load-cpu-aiohttp-2-processes.json",
        needs=("bundle", "data"),
        cost=40,
    ),
    "api_load_ab": Run(
        "api_load_ab.py",
        lambda t: [
            "--base",
            "HEAD",
            "--model",
            str(t.bundle),
            "--data",
            _test_split(t),
            "--rounds",
            "1",
            "--duration",
            "0.3",
            "--levels",
            "2",
            "--warmup",
            "0.1",
        ],
        "api_load-ab-cpu.json",
        needs=("bundle", "data"),
        cost=60,
    ),
    "assertion": Run(
        "assertion.py",
        lambda t: [
            "--cache",
            str(t.corpus_cache),
            "--model",
            f"tiny={t.bundle}",
            "--own-styles",  # the tiny model has none: each corpus read as the model's own
            "--out",
            str(t.results / "assertion"),
        ],
        "assertion/summary.json",
        needs=("corpus_cache", "bundle"),
        cost=8,
    ),
    "bench": _protocol("cpu-small", 8, "bench.py"),
    "recipe_decisions": Run(
        "recipe_decisions.py",
        lambda t: ["--cache", str(t.corpus_cache)],
        "clinical/decisions.json",
        needs=("corpus_cache",),
        cost=3,
    ),
    "relations": Run(
        "relations.py",
        lambda t: [
            "--cache",
            str(t.corpus_cache),
            "--seeds",
            "1",
            "--model",
            str(t.bundle),
            "--out",
            str(t.results / "relations"),
        ],
        "relations/summary.json",
        needs=("corpus_cache", "bundle"),
        cost=4,
    ),
    "bulk": Run(
        "bulk.py",
        lambda t: [
            "--model",
            str(t.bundle),
            "--notes",
            "40",
            "--job-notes",
            "20",
            "--offline-notes",
            "10",
            "--chunk",
            "5",
            "--start-delay",
            "1",
            "--admin",
            PG_ADMIN,
            "--redis",
            REDIS,
        ],
        "bulk/bulk.json",
        needs=("bundle",),
        services=("postgres", "redis"),
        cost=95,
    ),
    "clinical_model": Run(
        "clinical_model.py",
        lambda t: [
            "--seeds",
            "1",
            "--epochs",
            "1",
            "--max-sentences",
            "4",
            "--base-model",
            str(t.tiny_encoder),
            "--cache",
            str(t.corpus_cache),
            "--out",
            str(t.results / "clinical"),
            "--work",
            str(t.work),
        ],
        "clinical/summary.json",
        needs=("tiny_encoder", "corpus_cache"),
        cost=50,
    ),
    "clinical_misses": Run(
        "clinical_misses.py",
        lambda t: ["--model", str(t.bundle), "--cache", str(t.corpus_cache)],
        "clinical/misses.json",
        needs=("bundle", "corpus_cache"),
        cost=8,
    ),
    "context_scaling": Run(
        "context_scaling.py",
        lambda t: ["--sizes", "100", "300", "--rounds", "1"],
        "context_scaling.json",
        cost=4,
    ),
    "first_start": Run(
        "first_start.py",
        lambda t: [
            "--cache",
            str(t.corpus_cache),
            "--port",
            str(_free_port()),
            "--epochs",
            "1",
            "--base-model",
            str(t.tiny_encoder),
            "--poll-seconds",
            "0.5",
            "--timeout-minutes",
            "5",
            "--out",
            str(t.results / "clinical" / "first-start.json"),
            "--keep-home",
            str(t.work / "first-start-home"),
        ],
        "clinical/first-start.json",
        needs=("tiny_encoder", "corpus_cache"),
        # the kept home holds the bundle the first start served
        after=_first_start_served_both,
        cost=90,
    ),
    "honest_vs_leaky": Run(
        "honest_vs_leaky.py",
        lambda t: [
            "--data",
            _test_split(t),
            "--name",
            "honest-vs-leaky",
            str(t.bundle),
            str(t.mslm_bundle),
        ],
        "honest-vs-leaky.json",
        needs=("bundle", "mslm_bundle", "data"),
        cost=15,
    ),
    "inference": Run(
        "inference.py",
        lambda t: [
            "--model",
            str(t.bundle),
            "--data",
            _test_split(t),
            "--limit",
            "4",
            "--repeats",
            "1",
            "--rounds",
            "1",
            "--latency-runs",
            "2",
        ],
        "inference-cpu.json",
        needs=("bundle", "data"),
        cost=22,
    ),
    "linking": Run(
        "linking.py",
        lambda t: ["--cache", str(t.corpus_cache), "--model", f"NCBI-disease-original={t.bundle}"],
        "linking/summary.json",
        needs=("corpus_cache", "bundle"),
        cost=8,
    ),
    "linking_rerank": Run(
        "linking.py",
        lambda t: [
            "--cache",
            str(t.corpus_cache),
            "--rerank-grid",
            "1,4",
            "--encoder",
            str(t.tiny_encoder),
        ],
        "linking/rerank-dev.json",
        needs=("corpus_cache", "tiny_encoder"),
        after=_rerank_chosen_on_dev,
        cost=15,
    ),
    "linking_speed": Run(
        "linking_speed.py",
        lambda t: [
            "--model",
            str(t.bundle),
            "--data",
            _test_split(t),
            "--sentences",
            "4",
            "--rounds",
            "1",
            "--sizes",
            "100,1000",
        ],
        "linking/speed.json",
        needs=("bundle", "data"),
        cost=8,
    ),
    "note_style": Run(
        "note_style.py",
        lambda t: [
            "run",
            "--model",
            f"tiny={t.bundle}",
            "--split",
            "dev",
            "--name",
            "note-style/smoke",
        ],
        "note-style/smoke.json",
        needs=("bundle",),
        cost=20,
    ),
    "ocr": Run(
        "ocr.py",
        lambda t: ["--cache", str(t.corpus_cache), "--data", str(t.data), "--rounds", "1"],
        "ocr.json",
        needs=("corpus_cache", "data"),
        after=_scanned_words_mended,
        cost=2,
    ),
    "omop_warehouse": Run(
        "omop_warehouse.py",
        lambda t: ["--notes", "5", "--admin", PG_ADMIN],
        None,  # a warehouse for bulk.py: its URL and timings on the last line, no results file
        services=("postgres",),
        after=lambda figures: _drop_database(figures["url"]),
        cost=4,
    ),
    "reliability": Run(
        "reliability.py",
        lambda t: [
            "--reuse-soak",
            "--doc",
            str(t.work / "reliability.md"),
            # one scenario that needs no server (the script requires them for every scenario)
            "tests/test_service.py::test_every_protected_route_refuses_missing_bad_and_wrong_"
            "scope_keys",
        ],
        "reliability.json",
        cost=35,
    ),
    **{
        f"reproduce[{p}]": _protocol(p, cost)
        for p, cost in (
            ("baseline", 12),
            ("baseline-cpu", 12),
            ("honest-mslm", 25),
            ("honest-mslm-full", 10),
            ("mslm-curve", 20),
            ("mslm-weights", 20),
            ("textbook-lr", 10),
            ("paper", 22),
            ("quality-ablation", 40),
        )
    },
    "soak": Run(
        "soak.py",
        lambda t: [
            "--model",
            str(t.bundle),
            "--data",
            str(t.data / "NCBI-disease-IOB"),
            "--minutes",
            "0.02",
            "--clients",
            "2",
            "--warmup",
            "0.3",
            "--base-model",
            str(t.tiny_encoder),
        ],
        "soak-cpu.json",
        needs=("bundle", "tiny_encoder", "data"),
        cost=33,
    ),
    "train_step": Run(
        "train_step.py",
        lambda t: [
            "--data",
            str(t.data / "NCBI-disease-IOB"),
            "--base-model",
            str(t.tiny_encoder),
            "--steps",
            "2",
            "--warmup",
            "1",
            "--batch-size",
            "2",
        ],
        "train_step-cpu.json",
        needs=("tiny_encoder", "data"),
        cost=14,
    ),
    "vocabulary_scale": Run(
        "vocabulary_scale.py", lambda t: ["--concepts", "200"], "vocabulary_scale.json", cost=10
    ),
    "athena_scale": Run(
        "athena_scale.py", lambda t: ["--scale", "0.0002"], "linking/athena_scale.json", cost=12
    ),
}


def _committed() -> dict[str, tuple[int, int]]:
    """The committed results and pages a benchmark writes by default, as (mtime, size)."""
    files = [*(BENCHMARKS / "results").rglob("*"), REPO / "docs" / "reliability.md"]
    return {str(p): (p.stat().st_mtime_ns, p.stat().st_size) for p in files if p.is_file()}


def _holds(written: Any, figures: dict[str, Any]) -> bool:
    """Whether a results file holds the figures printed: as its top level (``emit``), as
    its headline, or (a protocol's summary) the protocol they are the headline of."""
    if not isinstance(written, dict):
        return False
    return (
        all(written.get(k) == v for k, v in figures.items())
        or written.get("headline") == figures
        or written.get("protocol") == figures.get("protocol") is not None
    )


@dataclass
class Done:
    """What a run left: its command, exit status, output, wall and CPU seconds (the CPU
    seconds of the script and of every process it waited for)."""

    cmd: list[str]
    returncode: int
    stdout: str
    stderr: str
    seconds: float
    cpu_seconds: float
    results: Path

    def report(self) -> str:
        killed = f" (killed after {TIMEOUT:.0f} s)" if self.seconds >= TIMEOUT else ""
        return (
            f"$ {' '.join(self.cmd)}\nexit status {self.returncode}{killed}\n"
            f"--- stdout\n{self.stdout[-6000:]}\n--- stderr\n{self.stderr[-6000:]}"
        )


# The fixtures the runs need, cheapest first: a run starts as soon as it has all of its own.
FIXTURES = ("tiny_encoder", "data", "corpus_cache", "bundle", "mslm_bundle")
# Runs side by side: most of a small run is starting processes and waiting for servers,
# jobs and workers, which leaves the cores free for another run.
SIDE_BY_SIDE = (os.cpu_count() or 1) + 1
TIMEOUT = 480.0


class Launcher:
    """Starts the selected runs, longest first, :data:`SIDE_BY_SIDE` at a time; each test
    waits for its own."""

    def __init__(self, request: pytest.FixtureRequest, names: list[str], root: Path):
        from concurrent.futures import ThreadPoolExecutor

        import torch

        self.root = root
        self.committed = _committed()
        self.unavailable = {
            name: problems
            for name in names
            if (problems := _unavailable(RUNS[name].services)) is not None
        }
        pending = sorted(
            (n for n in names if n not in self.unavailable), key=lambda n: -RUNS[n].cost
        )
        self.pool = ThreadPoolExecutor(SIDE_BY_SIDE, thread_name_prefix="benchmark")
        self.futures: dict[str, Any] = {}
        have: dict[str, Any] = {}

        def start_ready() -> None:
            for name in [n for n in pending if set(RUNS[n].needs) <= set(have)]:
                pending.remove(name)
                t = SimpleNamespace(
                    results=root / name / "results",
                    work=root / name / "work",
                    **{n: have[n] for n in RUNS[name].needs},
                )
                self.futures[name] = self.pool.submit(self._run, name, t)

        start_ready()
        threads = torch.get_num_threads()
        torch.set_num_threads(1)  # the fixtures train beside the runs started already
        try:
            for fixture in FIXTURES:
                if any(fixture in RUNS[n].needs for n in pending):
                    have[fixture] = request.getfixturevalue(fixture)
                    start_ready()
        finally:
            torch.set_num_threads(threads)
        assert not pending, f"runs whose fixtures are not in FIXTURES: {pending}"

    def _run(self, name: str, t: SimpleNamespace) -> Done:
        run = RUNS[name]
        cmd = [sys.executable, str(BENCHMARKS / run.script), *run.argv(t)]
        env = {
            **os.environ,
            "MSLM_BENCH_RESULTS": str(t.results),
            "HF_HUB_OFFLINE": "1",
            "TRANSFORMERS_OFFLINE": "1",
            "TOKENIZERS_PARALLELISM": "false",
            "PYTHONUNBUFFERED": "1",
            # one thread per runtime: on matrices this small, threads that wait for each other
            # on busy cores cost more than the work (runs go side by side)
            **dict.fromkeys(("OMP_NUM_THREADS", "MKL_NUM_THREADS"), "1"),
            **dict.fromkeys(("MSLM_INTRA_OP_THREADS", "MSLM_INTER_OP_THREADS"), "1"),
        }
        folder = self.root / name
        folder.mkdir(parents=True, exist_ok=True)
        started = time.perf_counter()
        with open(folder / "stdout", "w+") as out, open(folder / "stderr", "w+") as err:
            proc = subprocess.Popen(
                cmd, cwd=REPO, env=env, stdout=out, stderr=err, start_new_session=True
            )
            timer = threading.Timer(TIMEOUT, os.killpg, (proc.pid, signal.SIGKILL))
            timer.start()
            try:
                _, status, usage = os.wait4(proc.pid, 0)  # the CPU time of the whole tree
            finally:
                timer.cancel()
            proc.returncode = os.waitstatus_to_exitcode(status)
            out.seek(0)
            err.seek(0)
            return Done(
                cmd,
                proc.returncode,
                out.read(),
                err.read(),
                time.perf_counter() - started,
                usage.ru_utime + usage.ru_stime,
                t.results,
            )

    def result(self, name: str) -> Done:
        if name in self.unavailable:
            problems = self.unavailable[name]
            if os.environ.get("MSLM_REQUIRE_SERVICES") == "1":
                pytest.fail(f"required (MSLM_REQUIRE_SERVICES=1) but unreachable: {problems}")
            pytest.skip(f"not reachable: {problems}")
        return self.futures[name].result()


@pytest.fixture(scope="session")
def launched(request, tmp_path_factory) -> Iterator[Launcher]:
    """Every selected run of :func:`test_the_benchmark_runs_small`, started at once."""
    names = [
        item.callspec.params["name"]
        for item in request.session.items
        if getattr(item, "originalname", None) == "test_the_benchmark_runs_small"
    ]
    launcher = Launcher(request, names, tmp_path_factory.mktemp("bench-runs"))
    yield launcher
    launcher.pool.shutdown(wait=True, cancel_futures=True)


# a test waits for the runs started before its own (each run is stopped after TIMEOUT)
@pytest.mark.timeout(1200)
@pytest.mark.parametrize("name", list(RUNS))
def test_the_benchmark_runs_small(name: str, launched: Launcher) -> None:
    run = RUNS[name]
    done = launched.result(name)
    print(f"{name}: {done.seconds:.1f} s, {done.cpu_seconds:.1f} CPU s")
    assert done.returncode == 0, done.report()
    lines = done.stdout.strip().splitlines() or [""]
    try:
        figures = json.loads(lines[-1])
    except ValueError:
        pytest.fail(f"the last line printed is not JSON\n{done.report()}")
    assert isinstance(figures, dict) and figures, done.report()
    if run.after is not None:
        run.after(figures)
    if run.writes is not None:
        written = done.results / run.writes
        assert written.is_file(), f"{run.writes} not written in the results folder\n{done.report()}"
        assert _holds(json.loads(written.read_text(encoding="utf-8")), figures), done.report()
    assert _committed() == launched.committed, "a smoke run wrote into the committed results"


def test_every_script_has_a_run() -> None:
    """Every file in benchmarks/ is a script with a tiny run above, a script exempted with its
    reason (EXEMPT), or a helper the scripts import (HELPERS), which is no script itself."""
    files = {p.name: p.read_text(encoding="utf-8") for p in BENCHMARKS.glob("*.py")}
    covered = {run.script for run in RUNS.values()}
    missing = sorted(set(files) - covered - set(EXEMPT) - set(HELPERS))
    assert not missing, f"benchmark scripts with no tiny run in {__file__}: {missing}"
    assert not covered & (set(EXEMPT) | set(HELPERS))
    assert (covered | set(EXEMPT) | set(HELPERS)) <= set(files), "a run names no file"
    scripts = {name for name, text in files.items() if '__name__ == "__main__"' in text}
    assert not scripts & set(HELPERS), "a helper with a main is a script: give it a run"


def test_every_protocol_has_a_run() -> None:
    """Every protocol in benchmarks/protocols runs (smoke) through reproduce.py or bench.py."""
    protocols = {p.stem for p in PROTOCOLS.glob("*.toml")}
    covered = {run.protocol for run in RUNS.values() if run.protocol is not None}
    assert protocols == covered, f"protocols with no smoke run: {sorted(protocols - covered)}"


def test_a_smoke_protocol_keeps_every_variant_and_phase_on_one_dataset_and_seed() -> None:
    from harness import load_protocol, parse_protocol
    from harness.protocol import smoke_protocol, with_base_model

    raw = load_protocol(PROTOCOLS / "honest-mslm.toml").raw
    smoke = parse_protocol(smoke_protocol(with_base_model(raw, "tiny")))
    assert smoke.name == "honest-mslm-smoke"
    assert smoke.datasets == raw["datasets"][:1] and smoke.seeds == raw["seeds"][:1]
    assert list(smoke.variants) == list(raw["variants"])
    assert smoke.train["epochs"] == 1 and smoke.train["base_model"] == "tiny"
    assert smoke.grid is not None and smoke.screen is not None
    assert len(smoke.grid.elm_rate) * len(smoke.grid.blm_rate) <= 2
    assert smoke.grid.seeds == smoke.screen.seeds == smoke.seeds
    longer = parse_protocol(smoke_protocol(load_protocol(PROTOCOLS / "baseline-cpu.toml").raw))
    assert longer.settings_for("vanilla-4-epochs")["epochs"] == 2  # still one epoch more
    assert longer.settings_for("vanilla")["epochs"] == 1


def test_a_protocol_reads_a_clinical_corpus_from_the_corpus_cache(
    corpus_cache, tmp_path, monkeypatch
):
    """``MACCROBAT2020@N`` with no such folder under the data root is the clinical recipe's
    prepared folder in the corpus cache (its own types), and a run records it as such."""
    from harness import Runner, load_protocol

    monkeypatch.setenv("MSLM_CORPUS_CACHE", str(corpus_cache))
    protocol = load_protocol(PROTOCOLS / "mslm-curve.toml")
    runner = Runner(protocol, tmp_path / "empty", tmp_path / "results", tmp_path / "work", "cpu")
    paths = runner.dataset_paths("MACCROBAT2020@100")
    assert sorted(paths) == ["dev", "test", "train"]
    assert paths["train"].is_relative_to(corpus_cache)
    assert runner._where(paths["test"]) == "corpus-cache:MACCROBAT2020/test.jsonl"
    from mslm_core.errors import CorpusError

    # the recipe's IOB corpora too (the pinned BLURB files); any other name is not looked up
    assert runner._where(runner.dataset_paths("BC5CDR-IOB@100")["dev"]).startswith(
        "corpus-cache:BC5CDR-IOB/"
    )
    with pytest.raises(CorpusError, match="BC5CDR-chem-IOB: directory not found"):
        runner.dataset_paths("BC5CDR-chem-IOB@100")


def test_clinical_misses_sorts_each_gold_mention_and_counts_spurious_predictions(corpus_cache):
    """The breakdown of benchmarks/clinical_misses.py against predictions written by hand
    (BC5CDR's toy test split: Chemical → Drug, Disease → Problem)."""
    from types import SimpleNamespace

    from clinical_misses import breakdown

    from mslm_core.corpora import clinical

    def m(start, end, label):
        return SimpleNamespace(start=start, end=end, label=label)

    by_first_word = {
        # "breast cancer" (Problem): found
        "The": [m(3, 5, "Problem")],
        # "Aspirin" (Drug) typed as a Test; "fever" (Problem) as a Drug; "reduces" spurious
        "Aspirin": [m(0, 1, "Test"), m(1, 2, "Problem"), m(2, 3, "Drug")],
        # "diabetes" found with other boundaries; "cancer" missed
        "No": [m(2, 4, "Problem")],
        # "Cisplatin" found; "renal failure" missed; an Anatomy elsewhere is not scored
        "Cisplatin": [m(0, 1, "Drug"), m(5, 7, "Anatomy")],
    }

    class Scripted:
        builder, style = SimpleNamespace(styles=[""]), ""  # a model without source styles

        def predict_words(self, sentences, groups=None, styles=None):
            assert groups is None and styles is None  # a corpus, read as the bundle reads text
            return [by_first_word[words[0]] for words in sentences]

    (source,) = clinical.sources(corpus_cache, ("BC5CDR-IOB",))
    report = breakdown(Scripted(), source)
    assert report["counts"] == {
        "found": 2,
        "the other annotated type": 1,
        "a type this corpus does not annotate": 1,
        "overlapping span": 1,
        "nothing": 2,
    }
    assert report["gold_mentions"] == 7 and report["retyped"] == {"Drug → Test": 1}
    # Problem/Drug predictions: 5, of which "reduces" (Problem) touches no gold mention
    assert report["predictions_of_annotated_types"] == 5
    assert report["spurious_share"] == 20.0
    assert report["read_as"] is None

    class Styled(Scripted):  # a model trained with source styles reads BC5CDR as BC5CDR
        builder, style = (
            SimpleNamespace(styles=["", "MACCROBAT2020", "BC5CDR-IOB"]),
            "MACCROBAT2020",
        )

        def predict_words(self, sentences, groups=None, styles=None):
            assert styles == ["BC5CDR-IOB"] * len(sentences)
            return super().predict_words(sentences)

    styled = breakdown(Styled(), source)
    assert styled["read_as"] == "BC5CDR-IOB" and styled["counts"] == report["counts"]
