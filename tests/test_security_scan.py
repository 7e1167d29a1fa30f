"""Security scanners (issue 7): every bandit finding and every known-vulnerable dependency of
the image lock files is triaged in docs/security-triage.toml."""

from __future__ import annotations

import json
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
TRIAGE = tomllib.loads((REPO / "docs" / "security-triage.toml").read_text(encoding="utf-8"))
BIN = Path(sys.executable).parent

pytestmark = pytest.mark.reliability


def triaged(tool: str) -> set[tuple[str, str]]:
    out = set()
    for f in TRIAGE["finding"]:
        assert f["decision"] in ("accepted", "mitigated", "fixed") and f["reason"].strip()
        if f["tool"] == tool:
            out.update((f["id"], p) for p in f.get("paths", [f.get("package", "")]))
    return out


# what ships in the images (the benchmark harness in benchmarks/ is developer tooling)
PRODUCT = ("mslm_core", "api", "worker", "store", "mslm_settings.py")


def test_bandit_findings_are_triaged(record):
    out = subprocess.run(
        [str(BIN / "bandit"), "-q", "-r", *PRODUCT, "-f", "json"],
        cwd=REPO,
        capture_output=True,
        text=True,
    )
    results = json.loads(out.stdout)["results"]
    found = {(r["test_id"], r["filename"].removeprefix("./")) for r in results}
    untriaged = sorted(found - triaged("bandit"))
    high = [r for r in results if r["issue_severity"] == "HIGH"]
    record(
        "security: bandit",
        "bandit -r " + " ".join(PRODUCT),
        {
            "findings": len(results),
            "kinds": len(found),
            "high_severity": len(high),
            "untriaged": untriaged,
        },
        "all triaged" if not untriaged else "FAIL",
    )
    assert untriaged == [], "triage these in docs/security-triage.toml"
    assert high == []


@pytest.mark.parametrize(
    "lock",
    [
        "docker/requirements-api.txt",
        "docker/requirements-worker-gpu.txt",
        "docker/requirements-worker-cpu.txt",
    ],
)
def test_locked_dependencies_have_no_untriaged_vulnerability(lock, record):
    out = subprocess.run(
        [
            str(BIN / "pip-audit"),
            "-r",
            lock,
            "--no-deps",
            "--disable-pip",
            "--vulnerability-service",
            "pypi",
            "--progress-spinner",
            "off",
            "-f",
            "json",
        ],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=600,
    )
    deps = json.loads(out.stdout)["dependencies"]
    audited = [d for d in deps if not d.get("skip_reason")]
    if not audited:
        record(
            "security: pip-audit",
            f"pip-audit -r {lock}",
            {"packages": len(deps), "audited": 0},
            "not run: no vulnerability database reachable from here",
        )
        pytest.skip(
            "pip-audit could not reach a vulnerability database (PyPI's per-release "
            "JSON and osv.dev are not reachable from this network)"
        )
    vulns = {(v["id"], d["name"]) for d in audited for v in d.get("vulns", [])}
    untriaged = sorted(vulns - triaged("pip-audit"))
    record(
        "security: pip-audit",
        f"pip-audit -r {lock}",
        {
            "packages": len(deps),
            "audited": len(audited),
            "vulnerabilities": len(vulns),
            "untriaged": untriaged,
        },
        "all triaged" if not untriaged else "FAIL",
    )
    assert untriaged == []
