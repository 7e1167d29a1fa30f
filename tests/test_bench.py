"""The benchmark harness on a tiny protocol: runs, resume, aggregation, plots, decisions."""

from __future__ import annotations

import functools
import http.server
import itertools
import json
import math
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from conftest import TOY_CONLL

from harness import Runner, aggregate, load_protocol, parse_protocol
from harness.aggregate import (
    DECISION_RULE,
    decide,
    paired_t_p,
    render_markdown,
    summarize,
)
from harness.protocol import Protocol
from harness.runner import write_json
from harness.select import plan, plan_is_done, screen_ranking
from mslm_core.errors import ConfigError

PNG = b"\x89PNG\r\n\x1a\n"


@pytest.fixture()
def data_root(tmp_path: Path) -> Path:
    root = tmp_path / "data"
    for name in ("toy-a", "toy-b"):
        folder = root / name
        folder.mkdir(parents=True)
        for split in ("train.tsv", "devel.tsv", "test.tsv"):
            (folder / split).write_text(TOY_CONLL, encoding="utf-8")
    return root


def write_protocol(tmp_path: Path, encoder: Path, grid: bool = True) -> Path:
    text = f"""
name = "tiny"
description = "harness test"
datasets = ["toy-a", "toy-b"]
seeds = [1, 2]
baseline = "vanilla"
examples = 2

[train]
base_model = "{encoder}"
epochs = 2
batch_size = 2
learning_rate = 1e-3
patience = 0
eval_batch_size = 8

[variants.vanilla]
strategy = "vanilla"

[variants.mslm-clean]
strategy = "mslm"
detect_on = "clean"
"""
    if grid:
        text += """
[grid]
variant = "best"
elm_rate = [0.5, 1.0]
blm_rate = [0.0]
seeds = [1]
confirm = true
"""
    path = tmp_path / "tiny.toml"
    path.write_text(text, encoding="utf-8")
    return path


def test_tiny_protocol_runs_resumes_and_aggregates(tmp_path, data_root, tiny_encoder):
    protocol = load_protocol(write_protocol(tmp_path, tiny_encoder))
    results = tmp_path / "results" / "tiny"
    events: list[tuple[str, bool]] = []

    def runner() -> Runner:
        return Runner(
            protocol,
            data_root,
            results,
            tmp_path / "work",
            device="cpu",
            on_run=lambda spec, _record, skipped: events.append((spec.slug, skipped)),
        )

    out = runner().run_all()
    # 2 datasets × 2 variants × 2 seeds, then a 2-cell grid on seed 1, then the best cell on
    # seed 2 as well (seed 1 of that cell is the grid's run, reused)
    assert len([e for e in events if not e[1]]) == 8 + 4 + 2
    files = sorted((results / "runs").rglob("*.json"))
    assert len(files) == 14
    record = json.loads((results / "runs/toy-a/mslm-clean/seed1.json").read_text())
    assert record["settings"]["train"] == "toy-a/train.tsv"  # portable: relative to the root
    assert record["test_leaky"]["protocol"] == "reference-leaky"
    selection = record["test_leaky"]["selection"]  # chosen on gold-masked dev, as the paper
    assert [h["epoch"] for h in selection["history"]] == [1, 2]
    assert selection["best_epoch"] in (1, 2)
    assert len(record["examples"]) == 2 and record["examples"][0]["p_entity"]
    vanilla = json.loads((results / "runs/toy-a/vanilla/seed1.json").read_text())
    assert vanilla["test_leaky"] is None  # nothing to leak without masking
    assert len(vanilla["history"]) == 2 and all(h["dev_f1"] is not None for h in vanilla["history"])
    assert {r["phase"] for r in out} == {"variants", "grid", "confirm"}
    assert not list((tmp_path / "work").rglob("model.safetensors"))  # bundles removed

    # resume: nothing is trained again
    events.clear()
    runner().run_all()
    assert events and all(skipped for _, skipped in events)
    # an interrupted benchmark (a run missing) re-runs only that run, identically
    (results / "runs/toy-b/vanilla/seed2.json").unlink()
    events.clear()
    runner().run_all()
    assert [slug for slug, skipped in events if not skipped] == ["toy-b/vanilla/seed2"]
    again = json.loads((results / "runs/toy-b/vanilla/seed2.json").read_text())
    first = next(
        r for r in out if r["dataset"] == "toy-b" and r["label"] == "vanilla" and r["seed"] == 2
    )
    assert again["predictions_sha256"] == first["predictions_sha256"]  # seeded, reproducible

    command = "python benchmarks/bench.py run tiny.toml --data D"
    summary = aggregate(protocol, results, command=command)
    row = summary["datasets"]["toy-a"]["mslm-clean"]
    for key in ("f1_mean", "f1_std", "em_mean", "em_std", "seeds", "epochs_to_vanilla_best"):
        assert key in row
    assert row["seeds"] == [1, 2]
    assert row["vs_baseline"]["n_pairs"] == 2
    assert row["train_cost"] == "cpu" and record["train_cpu_seconds"] > 0
    assert record["train_cpu_seconds"] < record["cpu_seconds"]["train"]  # steps only
    confirmed = [k for k in summary["datasets"]["toy-a"] if "@" in k]
    assert len(confirmed) == 1 and summary["datasets"]["toy-a"][confirmed[0]]["seeds"] == [1, 2]
    assert len(summary["grid"]["toy-a"]["cells"]) == 2
    assert summary["decision"]["default"] in summary["datasets"]["toy-a"]
    md = (results / "summary.md").read_text()
    assert "test F1 (leaky)" in md and "Default:" in md
    assert "| `vanilla` |" in md and "python benchmarks/bench.py run tiny.toml" in md
    for name in summary["plots"]:
        assert (results / name).read_bytes().startswith(PNG)
    assert {"dev_f1_curves.png", "strategies.png", "grid_heatmap.png"} <= set(summary["plots"])
    assert any(n.startswith("confidence_examples-") for n in summary["plots"])
    assert json.loads((results / "summary.json").read_text())["n_runs"] == 14


def test_runs_side_by_side_score_as_one_after_the_other(tmp_path, data_root, tiny_encoder):
    protocol = load_protocol(write_protocol(tmp_path, tiny_encoder, grid=False))
    outs, events = {}, []
    for jobs in (1, 2):
        runner = Runner(
            protocol,
            data_root,
            tmp_path / f"results-{jobs}" / "tiny",
            tmp_path / f"work-{jobs}",
            device="cpu",
            on_run=lambda spec, _r, skipped, jobs=jobs: events.append((jobs, spec.slug, skipped)),
            jobs=jobs,
        )
        outs[jobs] = {f"{r['dataset']}/{r['label']}/{r['seed']}": r for r in runner.run_all()}
    assert len(outs[2]) == 8 and outs[2].keys() == outs[1].keys()
    for key, record in outs[2].items():  # seeded per run: the same models, whatever runs beside
        assert record["predictions_sha256"] == outs[1][key]["predictions_sha256"], key
        assert record["history"][-1]["dev_f1"] == outs[1][key]["history"][-1]["dev_f1"]
    assert sorted(slug for j, slug, skipped in events if j == 2 and not skipped) == sorted(
        slug for j, slug, _ in events if j == 1
    )
    with pytest.raises(ConfigError, match="jobs"):
        Runner(protocol, data_root, tmp_path / "r", tmp_path / "w", jobs=0)


_ORPHAN = """
import multiprocessing, os, sys, time
from concurrent.futures import ProcessPoolExecutor
from harness.runner import exit_with_parent

if __name__ == "__main__":
    pool = ProcessPoolExecutor(
        1, mp_context=multiprocessing.get_context("spawn"), initializer=exit_with_parent
    )
    print(pool.submit(os.getpid).result(), flush=True)
    pool.submit(time.sleep, 600)  # a run in progress
    time.sleep(600)
"""

# a benchmark script's shape: a server in a session of its own, stopped in a finally
_SERVER = """
import os, signal, subprocess, time
from common import exit_on_sigterm

exit_on_sigterm()
server = subprocess.Popen(["sleep", "600"], start_new_session=True)
try:  # the pid is told inside the try: a SIGTERM that comes at once still runs the finally
    print(server.pid, flush=True)
    time.sleep(600)
finally:
    os.killpg(server.pid, signal.SIGTERM)
    server.wait()
"""


@pytest.mark.parametrize(
    "script, sig",
    [(_ORPHAN, "SIGKILL"), (_SERVER, "SIGTERM")],
    ids=["a runner's spawned workers", "a script's server"],
)
def test_a_stopped_benchmark_leaves_no_process_behind(tmp_path, script, sig):
    """``kill`` on reproduce.py --jobs N (even -9: no handler runs) or on a benchmark that
    started a server: its workers and servers stop too, not run on unseen beside the next
    command."""
    (tmp_path / "parent.py").write_text(script, encoding="utf-8")
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1] / "benchmarks")}
    parent = subprocess.Popen(
        [sys.executable, str(tmp_path / "parent.py")], stdout=subprocess.PIPE, text=True, env=env
    )
    try:
        assert parent.stdout is not None
        child = int(parent.stdout.readline())
        assert _running(child)  # alive while its parent is
        parent.send_signal(getattr(signal, sig))
        parent.wait(timeout=30)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and _running(child):
            time.sleep(0.1)
        if _running(child):
            os.kill(child, signal.SIGKILL)
            pytest.fail(f"{child} outlived the process that started it")
    finally:
        parent.kill()


def _running(pid: int) -> bool:
    """Whether ``pid`` is a live process (one that exited but is not yet reaped, a zombie, is
    not)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def test_datasets_runs_a_part_of_a_protocol_now(tmp_path, data_root, tiny_encoder):
    protocol = load_protocol(write_protocol(tmp_path, tiny_encoder, grid=False))
    results, trained = tmp_path / "results" / "tiny", []

    def runner(only, proto=protocol):
        return Runner(
            proto,
            data_root,
            results,
            tmp_path / "work",
            device="cpu",
            on_run=lambda spec, _r, skipped: trained.append(spec.slug) if not skipped else None,
            only=only,
        )

    runner(["toy-b"]).run_all()
    assert sorted(trained) == sorted(
        f"toy-b/{v}/seed{s}" for v in ("vanilla", "mslm-clean") for s in (1, 2)
    )
    summary = aggregate(protocol, results, plots=False)
    assert not summary["complete"] and summary["datasets"]["toy-b"]["vanilla"]["seeds"] == [1, 2]
    trained.clear()
    runner(None).run_all()  # the rest later: only what is missing
    assert sorted(trained) == sorted(
        f"toy-a/{v}/seed{s}" for v in ("vanilla", "mslm-clean") for s in (1, 2)
    )
    assert aggregate(protocol, results, plots=False)["complete"]

    with pytest.raises(ConfigError, match=r"toy-c: not in protocol tiny \(its datasets: toy-a"):
        runner(["toy-b", "toy-c"])
    # a plan whose next choice needs every dataset's runs cannot be cut by dataset
    gridded = load_protocol(write_protocol(tmp_path, tiny_encoder, grid=True))
    with pytest.raises(ConfigError, match="datasets not selected"):
        Runner(
            gridded, data_root, tmp_path / "r2", tmp_path / "w2", "cpu", only=["toy-a"]
        ).run_all()


def test_reproduce_is_bench_run_with_the_repositorys_data_folder(monkeypatch, capsys):
    """reproduce.py takes bench.py run's options (declared once), --data defaulting to the
    repository's data folder."""
    import reproduce
    from common import DATA

    from harness import cli

    seen = {}
    monkeypatch.setattr(cli, "run", lambda args, command: seen.update(args=args, command=command))
    reproduce.main(["mslm-curve", "--datasets", "MACCROBAT2020@100", "--jobs", "2"])
    args = seen["args"]
    assert (args.protocol, args.data, args.datasets, args.jobs, args.device) == (
        "mslm-curve",
        str(DATA),
        ["MACCROBAT2020@100"],
        2,
        "auto",
    )
    assert seen["command"] == (
        "python benchmarks/reproduce.py mslm-curve --datasets MACCROBAT2020@100 --jobs 2"
    )
    bench = cli.build_parser().parse_args(["run", "mslm-curve", "--data", "D", "--jobs", "2"])
    assert vars(bench) == {**vars(args), "data": "D", "datasets": None, "bench_command": "run"}
    with pytest.raises(SystemExit):  # bench.py run names its data folder
        cli.build_parser().parse_args(["run", "mslm-curve"])
    assert "the following arguments are required: --data" in capsys.readouterr().err
    with pytest.raises(SystemExit):  # an option neither knows, refused in reproduce.py's words
        reproduce.main(["mslm-curve", "--epochs", "3"])
    assert "benchmarks/reproduce.py: error: unrecognized arguments: --epochs" in (
        capsys.readouterr().err
    )


def _result(ds, label, seed, dev, test, history=None, seconds=10.0):
    report = {"strict": {"precision": test, "recall": test, "f1": test}, "exact_match": test}
    return {
        "protocol": "p",
        "dataset": ds,
        "label": label,
        "variant": label,
        "seed": seed,
        "phase": "variants",
        "cell": None,
        "dev": {
            "strict": {"precision": dev, "recall": dev, "f1": dev},
            "exact_match": dev,
            "perplexity": None,
        },
        "test": report,
        "test_leaky": None,
        "train_seconds": seconds,
        "history": history or [{"epoch": 1, "dev_f1": dev, "seconds": seconds}],
    }


def _protocol(**variants) -> Protocol:
    return parse_protocol(
        {
            "name": "p",
            "datasets": ["a", "b"],
            "seeds": [1, 2, 3],
            "variants": {"vanilla": {"strategy": "vanilla"}, **variants},
        }
    )


def test_aggregate_statistics_against_hand_computed_values():
    from scipy import stats

    p = _protocol(mslm={"strategy": "mslm", "detect_on": "clean"})
    van = [0.70, 0.72, 0.71]
    msl = [0.73, 0.72, 0.75]
    results = []
    for ds in ("a", "b"):
        for seed, (v, m) in enumerate(zip(van, msl, strict=True), start=1):
            hist_v = [
                {"epoch": 1, "dev_f1": v - 0.1, "seconds": 5.0},
                {"epoch": 2, "dev_f1": v, "seconds": 5.0},
            ]
            hist_m = [
                {"epoch": 1, "dev_f1": v + 0.01, "seconds": 7.0},  # reaches vanilla's best at 1
                {"epoch": 2, "dev_f1": m, "seconds": 7.0},
            ]
            results.append(_result(ds, "vanilla", seed, v, v, hist_v, 10.0))
            results.append(_result(ds, "mslm", seed, m, m, hist_m, 14.0))
    s = summarize(p, results)
    row = s["datasets"]["a"]["mslm"]
    assert row["f1_mean"] == pytest.approx(sum(msl) / 3)
    assert row["f1_std"] == pytest.approx(0.015275, abs=1e-5)  # sample std of 0.73,0.72,0.75
    assert row["epochs_to_vanilla_best"] == 1 and row["reached_vanilla_best"] == "3/3"
    assert row["seconds_to_vanilla_best"] == pytest.approx(7.0)
    table = render_markdown(s).split("## a")[1]
    assert "| 1.0 ep, 7 s (3/3) |" in table  # mslm: epochs and wall time to vanilla's best
    assert "| 2.0 ep, 10 s (3/3) |" in table  # vanilla reaches its own best at epoch 2
    vs = row["vs_baseline"]
    assert vs["p_value"] == pytest.approx(stats.ttest_rel(msl, van).pvalue)
    assert vs["train_time_ratio"] == pytest.approx(1.4)  # wall seconds: no CPU seconds
    assert row["train_cost"] == "wall"
    assert s["decision"]["candidate"] == "mslm" and s["decision"]["default"] == "mslm"
    for r in results:  # every run recorded CPU seconds: costs compare on those
        r["train_cpu_seconds"] = 30.0 if r["label"] == "vanilla" else 33.0
    row = summarize(p, results)["datasets"]["a"]["mslm"]
    assert row["train_cost"] == "cpu" and row["train_cost_mean"] == 33.0
    assert row["vs_baseline"]["train_time_ratio"] == pytest.approx(1.1)
    for r in results:  # on a GPU the host's CPU seconds say little: wall seconds again
        r["settings"] = {"device": "cuda"}
    row = summarize(p, results)["datasets"]["a"]["mslm"]
    assert row["train_cost"] == "gpu" and row["vs_baseline"]["train_time_ratio"] == pytest.approx(
        1.4
    )


def test_run_time_sums_the_runs_that_ran_and_names_their_machines():
    p = _protocol(mslm={"strategy": "mslm"})
    cpu = {"cpu": "AMD EPYC (avx2)", "cuda": None, "threads": 2}
    results = [_result("a", "vanilla", s, 0.7, 0.7) for s in (1, 2)]
    results.append(_result("a", "mslm", 1, 0.7, 0.7))
    for r, (train, evaluate) in zip(results, [(100, 5), (110, 5), (150, 20)], strict=True):
        r.update(wall_seconds={"train": train, "evaluate": evaluate}, machine=cpu)
    twin = {**results[2], "label": "cell", "same_run_as": "a/mslm/seed1"}  # reused: no cost
    s = summarize(p, [*results, twin])
    assert s["run_time"] == {
        "runs": 3,
        "wall_seconds": 390.0,
        "machines": ["AMD EPYC (avx2), 2 threads"],
    }
    assert "Run time: 3 runs, 6.5 minutes of wall time" in render_markdown(s)


def test_decision_keeps_the_baseline_unless_the_candidate_wins_on_every_dataset():
    p = _protocol(mslm={"strategy": "mslm", "detect_on": "clean"})
    every, one = [1, 2, 3], [1]
    table = {
        "a": {
            "vanilla": {"dev_f1_mean": 0.70, "seeds": every},
            "mslm": {"dev_f1_mean": 0.80, "seeds": every},
            "screened": {"dev_f1_mean": 0.90, "seeds": one},  # one seed: not a candidate
        },
        "b": {
            "vanilla": {"dev_f1_mean": 0.70, "seeds": every},
            "mslm": {"dev_f1_mean": 0.69, "seeds": every},
            "screened": {"dev_f1_mean": 0.90, "seeds": one},
        },
    }
    d = decide(p, table)
    assert d["candidate"] == "mslm"
    assert d["beats_baseline_on_dev"] == {"a": True, "b": False}
    assert d["default"] == "vanilla"
    table["b"]["mslm"]["dev_f1_mean"] = 0.71
    assert decide(p, table)["default"] == "mslm"
    table["b"]["vanilla"]["seeds"] = one  # the baseline unfinished: nothing is decided yet
    assert decide(p, table) == {
        "rule": DECISION_RULE,
        "candidate": None,
        "default": "vanilla",
        "pending": True,
    }


def _screened_protocol(grid_datasets=None) -> Protocol:
    grid = {"variant": "best", "elm_rate": [0.5, 1.0], "blm_rate": [0.075], "seeds": [1]}
    if grid_datasets:
        grid["datasets"] = grid_datasets
    return parse_protocol(
        {
            "name": "p",
            "datasets": ["a", "b"],
            "seeds": [1, 2, 3],
            "variants": {
                "vanilla": {"strategy": "vanilla"},
                "clean": {"strategy": "mslm", "detect_on": "clean"},
                "paper": {"strategy": "mslm"},
                "span": {"strategy": "span"},
            },
            "screen": {"seeds": [1], "keep": 2},
            "grid": grid,
        }
    )


def _record(spec, dev):
    r = _result(spec.dataset, spec.label, spec.seed, dev, dev)
    r.update(variant=spec.variant, phase=spec.phase)
    if spec.cell is not None:
        r["cell"] = {"elm_rate": spec.cell[0], "blm_rate": spec.cell[1]}
    return r


def test_screen_grid_and_confirm_plan_by_dev_only():
    p = _screened_protocol(grid_datasets=["a"])
    dev = {"vanilla": 0.70, "clean": 0.74, "paper": 0.10, "span": 0.72}
    specs, final = plan(p, [])
    assert not final and {(s.label, s.seed) for s in specs} == {(v, 1) for v in dev}
    assert len(specs) == 8  # every variant on the screen seed, both datasets
    results = [_record(s, dev[s.label]) for s in specs]
    # the screen is done: vanilla and the two best others by dev go on; the grid waits
    specs, final = plan(p, results)
    later = [s for s in specs if s.seed != 1]
    assert not final
    assert {s.label for s in later} == {"vanilla", "clean", "span"}
    assert {s.seed for s in later} == {2, 3} and len(later) == 12
    results += [_record(s, dev[s.label] + 0.01 * s.seed) for s in later]
    assert screen_ranking(p, results)[0] == ["vanilla", "clean", "span"]
    # the grid goes to the best kept ELM-BLM variant ("paper" is screened out), dataset a only
    specs, final = plan(p, results)
    grid = [s for s in specs if s.phase == "grid"]
    assert not final
    assert {(s.dataset, s.label) for s in grid} == {
        ("a", "clean@elm0.5-blm0.075"),
        ("a", "clean@elm1-blm0.075"),
    }
    results += [_record(s, 0.80 if s.cell == (0.5, 0.075) else 0.60) for s in grid]
    # the best cell by dev is confirmed on every seed and dataset
    specs, final = plan(p, results)
    confirm = [s for s in specs if s.phase == "confirm"]
    assert final and {s.label for s in confirm} == {"clean@elm0.5-blm0.075"}
    assert {(s.dataset, s.seed) for s in confirm} == {(d, k) for d in "ab" for k in (1, 2, 3)}
    assert not plan_is_done(p, results)
    results += [_record(s, 0.8) for s in confirm if s.dataset == "b" or s.seed != 1]
    assert plan_is_done(p, results)
    summary = summarize(p, results)
    assert summary["complete"] and summary["screen"]["kept"] == ["vanilla", "clean", "span"]
    assert summary["datasets"]["a"]["paper"]["seeds"] == [1]  # screened out, still reported
    assert summary["decision"]["candidate"] == "clean@elm0.5-blm0.075"
    md = render_markdown(summary)
    assert "| `paper` | 10.00 | no |" in md and "Incomplete" not in md


def test_a_grid_cell_equal_to_a_variant_reuses_its_run(tmp_path):
    p = _screened_protocol()
    runner = Runner(p, tmp_path / "data", tmp_path / "results", tmp_path / "work")
    [variant_spec] = [s for s in p.variant_runs() if s.dataset == "a" and s.label == "clean"]
    write_json(runner.result_path(variant_spec), _record(variant_spec, 0.7))
    same, other = sorted(
        (s for s in p.grid_runs("clean") if s.dataset == "a"), key=lambda s: -s.cell[0]
    )
    assert same.cell == (1.0, 0.075)  # clean's own rates
    record = runner.run(same)  # no training: the data root does not even exist
    assert record["same_run_as"] == "a/clean/seed1" and record["label"] == same.label
    assert record["cell"] == {"elm_rate": 1.0, "blm_rate": 0.075}
    assert runner.result_path(same).exists()
    assert runner._reuse_twin(other) is None  # ELM 0.5: a different run


def test_paired_t_p_undefined_cases():
    assert paired_t_p([0.5], [0.4]) is None  # one pair
    assert paired_t_p([0.5, 0.6], [0.4, 0.5]) is None  # identical differences


@pytest.mark.parametrize(
    "patch, message",
    [
        ({"colour": 1}, "protocol.colour: unknown key"),
        ({"seeds": []}, "protocol.seeds"),
        ({"seeds": [1, 1]}, "repeats a seed"),
        ({"train": {"seed": 3}}, "protocol.train.seed: is set per run"),
        ({"train": {"epochz": 3}}, "protocol.train.epochz: unknown training setting"),
        ({"train": {"elm_rate": 2.0}}, "elm_rate: must be in [0, 1]"),
        ({"baseline": "nope"}, "protocol.baseline"),
        ({"variants": {"x@y": {}}}, "invalid variant name"),
        ({"variants": {"vanilla": {}, "a": {"b": {"epochs": 1}}}}, "quote a variant name"),
        ({"grid": {"variant": "nope", "elm_rate": [1.0], "blm_rate": [0.0]}}, "grid.variant"),
        ({"grid": {"elm_rate": [1.5], "blm_rate": [0.0]}}, "grid.elm_rate"),
        ({"grid": {"elm_rate": [1], "blm_rate": [0], "datasets": ["x"]}}, "grid.datasets"),
        ({"screen": {"keep": 0}}, "protocol.screen.keep"),
        ({"screen": {"seeds": [7], "keep": 1}}, "screen.seeds: must be some of"),
        ({"screen": {"keep": 1, "seed": [1]}}, "protocol.screen.seed: unknown key"),
    ],
)
def test_protocol_errors_name_the_key(patch, message):
    data = {"name": "p", "datasets": ["a"], "seeds": [1], "variants": {"vanilla": {}}}
    data.update(patch)
    with pytest.raises(ConfigError) as err:
        parse_protocol(data)
    assert message in str(err.value)


def test_grid_skips_cells_the_variant_cannot_train():
    p = parse_protocol(
        {
            "name": "p",
            "datasets": ["a"],
            "seeds": [1],
            "baseline": "ign",
            "variants": {
                "ign": {"strategy": "mslm", "elm_rate": 0.5, "detect_ignore_masked": True}
            },
            "grid": {"variant": "ign", "elm_rate": [0.5, 1.0], "blm_rate": [0.0, 0.1]},
        }
    )
    cells = {spec.cell for spec in p.grid_runs("ign")}
    assert cells == {(0.5, 0.0), (0.5, 0.1)}  # ELM 1.0 leaves no entity token to detect


def test_committed_protocols_parse():
    folder = Path(__file__).resolve().parents[1] / "benchmarks" / "protocols"
    names = sorted(p.stem for p in folder.glob("*.toml"))
    assert {"cpu-small", "paper", "honest-mslm"} <= set(names)
    for path in folder.glob("*.toml"):
        protocol = load_protocol(path)
        assert protocol.name == path.stem
        assert protocol.variant_runs()


def test_committed_results_are_what_their_protocols_aggregate_to():
    """Every committed results folder reloads with the protocol its runs followed (its
    protocol.json, also after the TOML has changed) and its summary is what today's
    aggregation makes of its runs: the committed figures come from the committed code."""
    from harness.aggregate import load_results

    root = Path(__file__).resolve().parents[1] / "benchmarks" / "results"
    folders = sorted(p.parent for p in root.rglob("protocol.json"))
    assert {f.relative_to(root).as_posix() for f in folders} >= {"cpu-small", "honest-mslm"}
    for folder in folders:
        protocol = load_protocol(folder / "protocol.json")
        assert protocol.name == folder.name
        committed = json.loads((folder / "summary.json").read_text())
        summary = summarize(protocol, load_results(folder))
        for key in ("datasets", "decision", "complete", "run_time", "n_runs"):
            assert summary[key] == committed[key], (folder, key)


def test_the_default_in_code_is_what_the_learning_curve_decided():
    """docs/benchmarks.md, "Does MSLM help?": the ``mslm-curve`` protocol picks the default
    recipe by training-set size. Until it has decided, the default stays the honest-mslm
    study's choice; once it has, the defaults of a training config are the winner's settings
    (one winner at every size), or the strategy is ``auto`` (the winner changes with size)."""
    from mslm_core.config import AUTO_BY_SIZE, DEFAULT_STRATEGY, TrainConfig, auto_rule

    root = Path(__file__).resolve().parents[1] / "benchmarks" / "results" / "mslm-curve"
    decision = json.loads((root / "summary.json").read_text())["decision"]
    protocol = load_protocol(root / "protocol.json")
    # ``auto`` takes the winner of every size decided so far, switching halfway (geometric
    # mean) between two decided sizes with different winners; its last step reaches on
    decided = [(s["n"], s["winner"]) for s in decision["by_size"] if s["winner"] is not None]
    for n, winner in decided:
        rule = auto_rule(n)
        assert rule.variant == winner and n in rule.decided_at, n
        assert rule.settings == protocol.variants[winner], n
    assert sorted(n for r in AUTO_BY_SIZE for n in r.decided_at) == [n for n, _ in decided]
    for (n, a), (m, b) in itertools.pairwise(decided):
        if a != b:
            assert auto_rule(round(math.sqrt(n * m))).variant == a
            assert auto_rule(round(math.sqrt(n * m)) + 1).variant == b
    if decision["auto"]:  # decided at every size: the table is the decision's
        assert [(r.up_to_sentences, r.variant) for r in AUTO_BY_SIZE] == [
            (a["up_to_sentences"], a["variant"]) for a in decision["auto"]
        ]
    if decision["default"] is None:
        assert decision["pending"]
        assert DEFAULT_STRATEGY == "mslm_tapt"
    elif decision["default"] == "auto":
        assert DEFAULT_STRATEGY == "auto"
    else:
        (only,) = decision["auto"]
        defaults = TrainConfig(train="t", dev="d").to_dict()
        assert {k: defaults[k] for k in only["settings"]} == only["settings"]


def test_protocol_json_errors_name_the_file(tmp_path):
    path = tmp_path / "protocol.json"
    path.write_text("[1, 2]")
    with pytest.raises(ConfigError, match=r"protocol\.json: a protocol is a table"):
        load_protocol(path)
    path.write_text("{not json")
    with pytest.raises(ConfigError, match=r"protocol\.json: cannot read protocol"):
        load_protocol(path)


def test_missing_dataset_fails_before_training(tmp_path, tiny_encoder):
    protocol = load_protocol(write_protocol(tmp_path, tiny_encoder, grid=False))
    runner = Runner(protocol, tmp_path / "nowhere", tmp_path / "r", tmp_path / "w")
    with pytest.raises(Exception, match="directory not found"):
        runner.run_all()
    assert not (tmp_path / "r" / "runs").exists()


def test_fetch_verifies_checksums(tmp_path, monkeypatch):
    from harness import datasets

    served = tmp_path / "served" / "NCBI-disease-IOB"
    served.mkdir(parents=True)
    for name in datasets.SPLIT_FILES:
        (served / name).write_text(TOY_CONLL, encoding="utf-8")
    handler = functools.partial(
        http.server.SimpleHTTPRequestHandler, directory=str(tmp_path / "served")
    )
    handler.log_message = lambda *a, **k: None  # type: ignore[attr-defined]
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    base = f"http://127.0.0.1:{server.server_address[1]}"
    try:
        from mslm_core.bundle import sha256_file

        good = sha256_file(served / "train.tsv")
        monkeypatch.setitem(
            datasets.KNOWN_SHA256, "NCBI-disease-IOB", dict.fromkeys(datasets.SPLIT_FILES, good)
        )
        files = datasets.fetch(["NCBI-disease-IOB"], tmp_path / "dest", base_url=base)
        assert [f.name for f in files] == list(datasets.SPLIT_FILES)
        assert (tmp_path / "dest/NCBI-disease-IOB/test.tsv").read_text() == TOY_CONLL

        (served / "test.tsv").write_text(TOY_CONLL + "x\tO\n", encoding="utf-8")  # tampered
        (tmp_path / "dest/NCBI-disease-IOB/test.tsv").unlink()
        with pytest.raises(ConfigError, match="sha256"):
            datasets.fetch(["NCBI-disease-IOB"], tmp_path / "dest", base_url=base)
        assert not list((tmp_path / "dest/NCBI-disease-IOB").glob("*test*"))  # nothing kept
        with pytest.raises(ConfigError, match="unknown dataset"):
            datasets.fetch(["nope"], tmp_path / "dest", base_url=base)
    finally:
        server.shutdown()


def test_textbook_baseline_runs_beside_ours_on_a_sized_dataset(tmp_path, data_root, tiny_encoder):
    """``strategy = "hf-token-classification"`` trains transformers' own token classifier
    with the run's budget; a ``NAME@N`` dataset trains on the first N sentences."""
    path = tmp_path / "baseline.toml"
    path.write_text(
        f"""
name = "tiny-baseline"
datasets = ["toy-a", "toy-a@4"]
seeds = [1]
baseline = "textbook"
leaky = false
examples = 1

[train]
base_model = "{tiny_encoder}"
epochs = 2
batch_size = 2
learning_rate = 1e-3
patience = 0

[variants.textbook]
strategy = "hf-token-classification"

[variants.ours]
strategy = "vanilla"
""",
        encoding="utf-8",
    )
    protocol = load_protocol(path)
    results = tmp_path / "results"
    Runner(protocol, data_root, results, tmp_path / "work", device="cpu").run_all()
    full = json.loads((results / "runs/toy-a/textbook/seed1.json").read_text())
    small = json.loads((results / "runs/toy-a@4/textbook/seed1.json").read_text())
    ours = json.loads((results / "runs/toy-a@4/ours/seed1.json").read_text())
    for record in (full, small):
        assert record["settings"]["strategy"] == "hf-token-classification"
        assert record["settings"]["epochs"] == 2 and record["settings"]["learning_rate"] == 1e-3
        # our scorer, checked against seqeval on the same tags (they must agree exactly)
        assert record["test"]["seqeval_f1"] == pytest.approx(record["test"]["strict"]["f1"])
        assert record["dev"]["seqeval_f1"] == pytest.approx(record["dev"]["strict"]["f1"])
        assert [h["epoch"] for h in record["history"]] == [1, 2] and record["best_epoch"] == 2
        assert record["train_cpu_seconds"] > 0 and record["examples"][0]["p_entity"]
    assert (
        small["settings"]["max_train_sentences"] == 4
        and ours["settings"]["max_train_sentences"] == 4
    )
    assert full["settings"].get("max_train_sentences") is None
    assert full["settings"]["train"] == small["settings"]["train"] == "toy-a/train.tsv"
    summary = aggregate(protocol, results)
    assert set(summary["datasets"]["toy-a@4"]) == {"textbook", "ours"}


def test_the_textbook_tuned_as_our_recipe_keeps_its_best_dev_epoch(
    tmp_path, data_root, tiny_encoder, monkeypatch
):
    """``select = "best-dev"``: the textbook's weights are those of the epoch with the best dev
    F1 (here the second of three), not the last; by default it keeps the last, as a user's
    forty lines do."""
    import torch

    from harness import textbook

    real = textbook.score
    seen: list[float] = []  # each scoring's weights, summed

    def scored(tagger, corpus):
        metrics, mentions = real(tagger, corpus)
        with torch.no_grad():
            seen.append(float(sum(p.double().sum() for p in tagger.model.parameters())))
        if len(seen) <= 3:  # the epochs' dev scores: the second is the best
            metrics = {
                **metrics,
                "strict": {**metrics["strict"], "f1": (0.2, 0.8, 0.5)[len(seen) - 1]},
            }
        return metrics, mentions

    monkeypatch.setattr(textbook, "score", scored)
    paths = {
        split: data_root / "toy-a" / f"{name}.tsv"
        for split, name in (("train", "train"), ("dev", "devel"))
    }
    settings = {
        "base_model": str(tiny_encoder),
        "epochs": 3,
        "batch_size": 2,
        "learning_rate": 1e-3,
        "select": "best-dev",
    }
    out = textbook.train_textbook(settings, paths, 1, "cpu", tmp_path / "w")
    assert out["best_epoch"] == 2 and [h["dev_f1"] for h in out["history"]] == [0.2, 0.8, 0.5]
    assert seen[3] == pytest.approx(seen[1]) and seen[3] != pytest.approx(seen[2])
    seen.clear()
    last = textbook.train_textbook({**settings, "select": "last"}, paths, 1, "cpu", tmp_path / "l")
    assert last["best_epoch"] == 3 and seen[3] == pytest.approx(seen[2])


def test_a_sized_dataset_name_must_be_a_positive_count(tmp_path, tiny_encoder):
    text = write_protocol(tmp_path, tiny_encoder, grid=False).read_text()
    for bad in ('"toy-a@0"', '"toy-a@x"', '"@5"'):
        with pytest.raises(ConfigError, match="datasets"):
            parse_protocol(__import__("tomllib").loads(text.replace('"toy-a", "toy-b"', bad)), "p")


def test_compare_pairs_are_tested_run_by_run_and_the_decision_can_be_left_out(tmp_path):
    protocol = Protocol(
        name="cmp",
        datasets=["d"],
        seeds=[1, 2, 3],
        train={},
        variants={"base": {}, "a": {}, "b": {}},
        baseline="base",
        compare=[("a", "b")],
        decision=False,
    )

    def run(label, seed, f1, dev):
        return {
            "protocol": "cmp",
            "dataset": "d",
            "label": label,
            "variant": label,
            "seed": seed,
            "phase": "variants",
            "cell": None,
            "history": [{"epoch": 1, "dev_f1": dev, "seconds": 1.0}],
            "train_seconds": 10.0,
            "train_cpu_seconds": 20.0 if label == "a" else 10.0,
            "dev": {"strict": {"f1": dev}, "perplexity": None},
            "test": {"strict": {"f1": f1, "precision": f1, "recall": f1}, "exact_match": f1},
        }

    results = [
        run(label, seed, f1, f1)
        for label, scores in {
            "base": (0.5, 0.5, 0.5),
            "a": (0.80, 0.82, 0.81),
            "b": (0.78, 0.79, 0.80),
        }.items()
        for seed, f1 in zip((1, 2, 3), scores, strict=True)
    ]
    summary = summarize(protocol, results)
    (pair,) = summary["comparisons"]["d"]
    assert (pair["a"], pair["b"], pair["seeds"]) == ("a", "b", [1, 2, 3])
    assert pair["f1_diff_mean"] == pytest.approx(0.02)  # (0.02 + 0.03 + 0.01) / 3
    assert pair["p_value"] == pytest.approx(paired_t_p([0.80, 0.82, 0.81], [0.78, 0.79, 0.80]))
    assert pair["train_time_ratio"] == pytest.approx(2.0)
    assert summary["decision"] is None
    md = render_markdown(summary)
    assert "## Paired comparisons" in md and "| d | `a` | `b` | 1,2,3 | 2.00 ± 1.00 |" in md
    assert "## Decision" not in md


def test_compare_must_name_variants(tmp_path, tiny_encoder):
    import tomllib

    data = tomllib.loads(write_protocol(tmp_path, tiny_encoder, grid=False).read_text())
    with pytest.raises(ConfigError, match="compare"):
        parse_protocol({**data, "compare": [["vanilla", "nope"]]}, "p")
    with pytest.raises(ConfigError, match="decision"):
        parse_protocol({**data, "decision": "no"}, "p")


def test_ci95_is_student_t_over_the_paired_differences():
    from scipy import stats

    from harness.aggregate import ci95

    diffs = [0.01, 0.03, 0.02, 0.05]
    lo, hi = stats.t.interval(0.95, 3, loc=sum(diffs) / 4, scale=stats.sem(diffs))
    assert ci95(diffs) == pytest.approx([lo, hi])
    assert ci95([0.02]) is None


def _curve_protocol() -> Protocol:
    return parse_protocol(
        {
            "name": "p",
            "datasets": ["a@100", "a@1000", "b@100", "b@1000"],
            "seeds": [1, 2, 3],
            "baseline": "vanilla",
            "variants": {"vanilla": {"strategy": "vanilla"}, "big": {"strategy": "mslm"}},
            "compare": [["big", "vanilla"]],
            "decision": "by-size",
        }
    )


def _curve_results(big_at_1000: list[float]) -> list[dict]:
    """``big`` 3 points ahead on dev at 100 sentences on every (corpus, seed), and at 1,000
    by ``big_at_1000`` (per seed, both corpora); it costs twice vanilla's training."""
    results = []
    for ds in ("a", "b"):
        for seed in (1, 2, 3):
            base = 0.60 + 0.01 * seed + (0.05 if ds == "b" else 0.0)
            for n, ahead in ((100, 0.03 + 0.002 * seed), (1000, big_at_1000[seed - 1])):
                v = base + (0.1 if n == 1000 else 0.0)
                results.append(_result(f"{ds}@{n}", "vanilla", seed, v, v, seconds=10.0))
                results.append(
                    _result(f"{ds}@{n}", "big", seed, v + ahead, v + ahead, seconds=20.0)
                )
    return results


def test_the_default_by_size_is_the_best_on_dev_or_the_cheapest_tied_with_it():
    p = _curve_protocol()
    # at 1,000 sentences big is ahead by a hair in two seeds and behind in one: a tie
    s = summarize(p, _curve_results([0.004, -0.006, 0.003]))
    d = s["decision"]
    first, second = d["by_size"]
    assert (first["n"], first["best"], first["tied"], first["winner"]) == (100, "big", [], "big")
    assert (second["best"], second["tied"], second["winner"]) == ("big", ["vanilla"], "vanilla")
    assert d["default"] == "auto" and not d["pending"]
    assert [(a["up_to_sentences"], a["variant"]) for a in d["auto"]] == [
        (316, "big"),  # the geometric mean of 100 and 1,000
        (None, "vanilla"),
    ]
    assert d["auto"][0]["settings"]["strategy"] == "mslm"
    md = render_markdown(s)
    assert "**Default: `auto`** — `big` up to 316 sentences, `vanilla` above." in md
    # clearly ahead at 1,000 too: one default for every size
    d = summarize(p, _curve_results([0.02, 0.025, 0.03]))["decision"]
    assert d["default"] == "big" and [a["up_to_sentences"] for a in d["auto"]] == [None]
    # a size with a run missing: nothing is decided
    partial = [r for r in _curve_results([0.02] * 3) if (r["dataset"], r["seed"]) != ("b@1000", 3)]
    d = summarize(p, partial)["decision"]
    assert d["default"] is None and d["pending"] and d["by_size"][1]["winner"] is None
    assert "No default yet" in render_markdown(summarize(p, partial))


def test_costs_from_two_machines_give_no_ratio_and_a_tie_on_them_waits():
    p = _curve_protocol()
    results = _curve_results([0.004, -0.006, 0.003])  # a tie at 1,000, broken on cost
    avx512 = {"cpu": "AMD EPYC (avx2, avx512f)", "cuda": None, "threads": 2}
    avx2 = {"cpu": "AMD EPYC (avx2)", "cuda": None, "threads": 2}
    for r in results:  # seed 3 everywhere on a slower machine: each pair on one machine
        r["machine"] = avx2 if r["seed"] == 3 else avx512
    s = summarize(p, results)
    assert s["curve"]["a"]["pairs"]["big − vanilla"][1]["train_time_ratio"] == pytest.approx(2.0)
    assert s["decision"]["by_size"][1]["winner"] == "vanilla"  # the tie goes to the cheaper
    for r in results:  # big re-run on the slower machine at 1,000 sentences
        slow = r["label"] == "big" and r["dataset"].endswith("@1000")
        r["machine"] = avx2 if slow else avx512
    s = summarize(p, results)
    at_100, at_1000 = s["curve"]["a"]["pairs"]["big − vanilla"]
    assert at_100["train_time_ratio"] == pytest.approx(2.0)
    assert at_1000["train_time_ratio"] is None and not at_1000["train_cost_comparable"]
    assert s["datasets"]["a@1000"]["big"]["vs_baseline"]["train_time_ratio"] is None
    first, second = s["decision"]["by_size"]
    assert first["winner"] == "big"  # no tie at 100: cost is not asked
    assert (second["best"], second["tied"], second["winner"]) == ("big", ["vanilla"], None)
    assert second["pending"] and s["decision"]["default"] is None
    md = render_markdown(s)
    assert "| 0.926 | 0.03 | [-1.33, +1.40] | — (machines differ) |" in md  # the curve's pair
    assert "| 20 wall (no ratio: machines differ) |" in md  # the variant's row
    assert "| a@1000 | `big` | `vanilla` | 1,2,3 | 0.03 ± 0.55 | 0.926 | 0.03 | — (machines" in md
    assert "| 1000 | `big` | `vanilla` | pending: tied, costs from different machines |" in md
    assert "No default yet" in md


def test_the_learning_curve_gives_each_size_its_scores_and_paired_intervals():
    s = summarize(_curve_protocol(), _curve_results([0.004, -0.006, 0.003]))
    curve = s["curve"]["a"]
    assert curve["sizes"] == [100, 1000]
    assert [q["n"] for q in curve["variants"]["big"]] == [100, 1000]
    assert curve["variants"]["vanilla"][1]["test_f1_mean"] == pytest.approx(0.72)
    (at_100, at_1000) = curve["pairs"]["big − vanilla"]
    assert at_100["f1_diff_mean"] == pytest.approx(0.034)
    assert at_100["f1_diff_ci95"][0] > 0  # ahead in every seed by 3.2–3.6 points
    assert at_1000["f1_diff_ci95"][0] < 0 < at_1000["f1_diff_ci95"][1]
    md = render_markdown(s)
    assert "## Learning curve: a" in md and "| 100 | 1 |" not in md
    assert "| 100 | 1,2,3 | 3.40 | [+2.90, +3.90] |" in md


def test_a_decision_by_size_needs_two_sizes():
    with pytest.raises(ConfigError, match="by-size"):
        parse_protocol(
            {
                "name": "p",
                "datasets": ["a@100", "b"],
                "seeds": [1],
                "variants": {"vanilla": {"strategy": "vanilla"}},
                "decision": "by-size",
            }
        )


def test_the_tuned_textbook_trains_the_learning_rate_its_search_chose_on_dev():
    """baseline-cpu's ``textbook-tuned`` is the textbook as our recipe was tuned: the rate the
    committed ``textbook-lr`` search chose on dev, and its best dev epoch."""
    from harness.figures import RESULTS

    search = load_protocol(
        Path(__file__).resolve().parents[1] / "benchmarks/protocols/textbook-lr.toml"
    )
    chosen = json.loads((RESULTS / "textbook-lr/summary.json").read_text())["decision"]["default"]
    baseline = load_protocol(
        Path(__file__).resolve().parents[1] / "benchmarks/protocols/baseline-cpu.toml"
    )
    tuned = baseline.settings_for("textbook-tuned")
    assert tuned["learning_rate"] == search.settings_for(chosen)["learning_rate"]
    assert tuned["select"] == "best-dev" and tuned["strategy"] == "hf-token-classification"
