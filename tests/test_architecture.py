"""The rooms and their one-way doors (docs/architecture.md).

The import contracts are import-linter's, declared in ``pyproject.toml`` (``[tool.importlinter]``:
the layers api → worker → store → mslm_core, the API into the workers through their queue only,
the client apart, no network library, no import circle at any depth). Every import counts:
those inside functions (a lazy import still ties two modules together) and those under
``if TYPE_CHECKING:`` too. What the contracts cannot say — which module may use the standard
library's ``urllib.request``, which module may query the database — is checked here by walking
the syntax trees.
"""

from __future__ import annotations

import ast
import io
import os
import re
import subprocess
import sys
import tokenize
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("mslm_core", "api", "worker", "store", "mslm_client")
MODULES = ("mslm_settings",)

# nothing in the product fetches from the network (models come from disk) — but the public
# corpora of the first model, at pinned commits, each file checked against its pinned sha256,
# in one module; nor does it run the benchmarks' harness
DOWNLOADERS = ("urllib.request", "harness", "benchmarks")
MAY_DOWNLOAD = {"mslm_core.corpora.pinned": {"urllib.request"}}


def _product_modules() -> dict[str, tuple[Path, bool]]:
    """Module name → (file, is a package)."""
    found = {}
    for package in PACKAGES:
        for path in (ROOT / package).rglob("*.py"):
            if "migrations" in path.parts:  # Alembic loads these by path, nobody imports them
                continue
            parts = list(path.relative_to(ROOT).with_suffix("").parts)
            is_package = parts[-1] == "__init__"
            found[".".join(parts[:-1] if is_package else parts)] = (path, is_package)
    for module in MODULES:
        found[module] = (ROOT / f"{module}.py", False)
    return found


def _under_type_checking(tree: ast.AST) -> set[int]:
    skipped: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            for child in node.body:
                skipped |= {id(n) for n in ast.walk(child)}
    return skipped


def _imports(name: str, path: Path, is_package: bool) -> dict[str, int]:
    """Every absolute module name ``name`` imports → the line of its first import."""
    package = name if is_package else name.rpartition(".")[0]
    tree = ast.parse(path.read_text(encoding="utf-8"))
    out: dict[str, int] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                out.setdefault(alias.name, node.lineno)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")
                parts = parts[: len(parts) - node.level + 1]
                base = ".".join(parts + ([node.module] if node.module else []))
            for alias in node.names:  # `from . import submodule` imports the submodule
                out.setdefault(f"{base}.{alias.name}", node.lineno)
    return out


def _lint_imports(root: Path, config: Path) -> subprocess.CompletedProcess[str]:
    lint = Path(sys.executable).with_name("lint-imports")
    env = {**os.environ, "PYTHONPATH": str(root)}
    return subprocess.run(
        [str(lint), "--config", str(config), "--no-cache", "--no-logo"],
        cwd=root,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_the_import_contracts_hold():
    contracts = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]
    assert sorted(contracts["root_packages"]) == sorted(PACKAGES)
    assert contracts["exclude_type_checking_imports"] is False
    done = _lint_imports(ROOT, ROOT / "pyproject.toml")
    n = len(contracts["contracts"])
    assert done.returncode == 0 and f"Contracts: {n} kept, 0 broken." in done.stdout, done.stdout
    # a linter that saw nothing would keep every contract
    analyzed = next(line for line in done.stdout.splitlines() if line.startswith("Analyzed"))
    assert int(analyzed.split()[1]) >= len(_product_modules()) - len(MODULES)


def test_the_contracts_catch_a_circle_and_a_door_the_wrong_way(tmp_path):
    """The product's contracts, on a copy of the product with a circle under TYPE_CHECKING
    between two modules of the training package and the library importing the store."""
    for package in PACKAGES:
        (tmp_path / package).symlink_to(ROOT / package, target_is_directory=True)
    (tmp_path / "mslm_core").unlink()
    core = tmp_path / "mslm_core"
    for path in (ROOT / "mslm_core").rglob("*.py"):
        (core / path.relative_to(ROOT / "mslm_core")).parent.mkdir(parents=True, exist_ok=True)
        (core / path.relative_to(ROOT / "mslm_core")).write_bytes(path.read_bytes())
    state = core / "train" / "state.py"
    state.write_text(
        state.read_text().replace(
            "if TYPE_CHECKING:\n", "if TYPE_CHECKING:\n    from .loop import Trainer\n", 1
        )
    )
    (core / "types.py").write_text((core / "types.py").read_text() + "\nimport store.db\n")
    (tmp_path / "pyproject.toml").write_bytes((ROOT / "pyproject.toml").read_bytes())
    done = _lint_imports(tmp_path, tmp_path / "pyproject.toml")
    assert done.returncode != 0, done.stdout
    assert "No cycles are allowed in mslm_core.train" in done.stdout
    assert "mslm_core.types -> store.db" in done.stdout


def test_nothing_in_the_product_downloads_or_runs_the_harness():
    wrong = [
        f"{name} imports {target} (line {line})"
        for name, (path, is_package) in _product_modules().items()
        for target, line in _imports(name, path, is_package).items()
        if any(target == d or target.startswith(d + ".") for d in DOWNLOADERS)
        and target not in MAY_DOWNLOAD.get(name, set())
    ]
    assert wrong == []


# -- the code describes itself; its history is git's and docs/' ----------------------------------
#: How a comment narrates history: an issue's number, a round of attacks, what it "was" before.
HISTORY = re.compile(
    r"\b[Ii]ssue \d+|\bround \d+, item|\(was (a|quadratic|linear)\b|\bwas a 500\b|\bBefore:"
)


def _comments_and_docstrings(source: str) -> list[tuple[int, str]]:
    found = [
        (t.start[0], t.string)
        for t in tokenize.generate_tokens(io.StringIO(source).readline)
        if t.type == tokenize.COMMENT
    ]
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            doc = ast.get_docstring(node, clean=False)
            if doc and node.body:
                found.append((node.body[0].lineno, doc))
    return sorted(found)


def test_no_comment_narrates_history():
    wrong = [
        f"{path.relative_to(ROOT)}:{line}: {match.group(0)}"
        for _, (path, _) in _product_modules().items()
        for line, text in _comments_and_docstrings(path.read_text(encoding="utf-8"))
        if (match := HISTORY.search(text))
    ]
    assert wrong == []


def test_the_history_finder_finds_it():
    before = '"""Linear (issue 29: it was quadratic)."""\nx = 1  # (was a 500, round 3, item 4)\n'
    assert [line for line, text in _comments_and_docstrings(before) if HISTORY.search(text)] == [
        1,
        2,
    ]


# -- the data layer owns every query (issue 32) --------------------------------------------------
#: All a module under api/ may take from SQLAlchemy: the type of a session and of the factory
#: that makes one — ``api.deps`` opens the request's session and the routes hand it to the
#: store's functions (``ModelManager``, ``VocabularyManager`` and ``KeyCache`` hold a factory
#: for the same). Never a query construct (select, update, delete, insert, func, text, …).
API_MAY_TAKE_FROM_SQLALCHEMY = {"sqlalchemy.orm": {"Session", "sessionmaker"}}
#: What a session does that reads or writes the database: called under api/, a query of its
#: own. Only ``store`` calls these; api/ passes its sessions on.
QUERYING = {
    "add",
    "add_all",
    "begin",
    "begin_nested",
    "commit",
    "delete",
    "execute",
    "expunge",
    "flush",
    "get",
    "merge",
    "query",
    "refresh",
    "rollback",
    "scalar",
    "scalars",
}
#: Methods no other object under api/ has: called on anything, a query of its own.
ALWAYS_QUERYING = {"commit", "execute", "rollback", "scalar", "scalars"}


def _session_names(tree: ast.AST) -> set[str]:
    """Names a module binds to a session: parameters typed ``Session``/``SessionDep``, the
    targets of ``with <…>factory…() as name``, and any name that says ``session``."""
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.arg) and node.annotation is not None:
            if ast.unparse(node.annotation).split(".")[-1] in ("Session", "SessionDep"):
                names.add(node.arg)
        elif isinstance(node, ast.withitem) and isinstance(node.optional_vars, ast.Name):
            if "factory" in ast.unparse(node.context_expr):
                names.add(node.optional_vars.id)
        elif isinstance(node, ast.Name) and "session" in node.id.lower():
            names.add(node.id)
    return names


def _queries(source: str) -> list[str]:
    """What ``source`` does that only the store may do: take a query construct from
    SQLAlchemy, or call a session's reading or writing method."""
    tree = ast.parse(source)
    skipped = _under_type_checking(tree)
    sessions = _session_names(tree)
    found: list[tuple[int, str]] = []
    for node in ast.walk(tree):
        if id(node) in skipped:
            continue
        if isinstance(node, ast.Import):
            found += [
                (node.lineno, f"import {a.name}")
                for a in node.names
                if a.name.split(".")[0] == "sqlalchemy"
            ]
        elif isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == "sqlalchemy":
            allowed = API_MAY_TAKE_FROM_SQLALCHEMY.get(node.module or "", set())
            found += [
                (node.lineno, f"from {node.module} import {a.name}")
                for a in node.names
                if a.name not in allowed
            ]
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            method, receiver = node.func.attr, node.func.value
            on_session = isinstance(receiver, ast.Name) and receiver.id in sessions
            if method in ALWAYS_QUERYING or (method in QUERYING and on_session):
                found.append((node.lineno, f"{ast.unparse(node.func)}()"))
    return [f"line {line}: {what}" for line, what in sorted(found)]


def test_the_api_has_no_query_of_its_own():
    """Issue 32: every query and commit is a function of ``store`` (one module per aggregate);
    a route calls it and turns its result or its error into HTTP."""
    wrong = {
        name: found
        for name, (path, _) in _product_modules().items()
        if name.split(".")[0] == "api" and (found := _queries(path.read_text(encoding="utf-8")))
    }
    assert wrong == {}


def test_the_worker_asks_the_store():
    """The workers read and write the job store through ``store`` functions too (claim, the
    claimed row, heartbeats, the model row, chunk results); what they run themselves is the
    warehouse's SQL of annotation jobs (``worker/bulk.py``: a hospital's database, read-only
    or its ``NOTE_NLP`` table, on connections of their own — never a store session)."""
    wrong = {}
    for name, (path, _) in _product_modules().items():
        if name.split(".")[0] != "worker":
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"))
        sessions = _session_names(tree)
        calls = [
            f"line {node.lineno}: {ast.unparse(node.func)}()"
            for node in ast.walk(tree)
            if isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr in QUERYING
            and isinstance(node.func.value, ast.Name)
            and node.func.value.id in sessions
        ]
        if calls:
            wrong[name] = calls
    assert wrong == {}


def test_the_query_finder_finds_them():
    # the finder must see what the routes did before issue 32, or the test above proves nothing
    before = """
from sqlalchemy import func, select
from sqlalchemy.orm import Session
from store.models import Dataset

def list_datasets(session: SessionDep, key):
    rows = session.scalars(select(Dataset))
    return rows, session.scalar(select(func.count()).select_from(Dataset))

def get(model_id, db: Session):
    return db.get(Dataset, model_id)

def write(state):
    with state.factory() as s:
        s.add(Dataset())
        s.commit()

def fine(state, items: dict):
    items.get("x")
    router.delete("/x")
"""
    assert _queries(before) == [
        "line 2: from sqlalchemy import func",
        "line 2: from sqlalchemy import select",
        "line 7: session.scalars()",
        "line 8: session.scalar()",
        "line 11: db.get()",
        "line 15: s.add()",
        "line 16: s.commit()",
    ]


# -- one declaration per fact (issue 32) --------------------------------------------------------
def test_an_assertion_attribute_is_declared_once():
    """``types.Assertion`` declares the attributes; the context rules' categories, the API's
    schema, the client and the formats follow it (adding one: the field in types.py, its
    category in context/rules.py, its rules in rules.json)."""
    from api.schemas import AssertionOut, CueOut
    from mslm_client.results import Assertion as ClientAssertion
    from mslm_core.context.rules import CATEGORIES
    from mslm_core.corpus.bioc import _prediction_infons
    from mslm_core.types import ASSERTION_ATTRIBUTES, Assertion, Entity

    names = list(ASSERTION_ATTRIBUTES)
    assert sorted(CATEGORIES.values()) == sorted(names)
    assert [f for f in AssertionOut.model_fields if f != "cues"] == names
    assert list(CueOut.model_json_schema()["properties"]["attribute"]["enum"]) == names
    every = Assertion(**dict.fromkeys(names, True))
    entity = Entity(0, 1, "x", "Problem", 1.0, 1.0, 1.0, assertion=every)
    as_json = entity.to_dict()["assertion"]
    AssertionOut.model_validate(as_json)
    client = ClientAssertion.from_dict(as_json)
    assert all(getattr(client, a) for a in names) and not client.present
    assert client.to_dict() == {**as_json, "cues": []}
    assert {a for a in names if _prediction_infons(entity)[a] == "true"} == set(names)


def test_the_libraries_are_typed_packages():
    """mslm_core and mslm_client are meant to be imported: each ships the PEP 561 marker, and
    the package data takes it into the wheel."""
    import tomllib

    root = Path(__file__).resolve().parents[1]
    data = tomllib.loads((root / "pyproject.toml").read_text())["tool"]["setuptools"]
    for package in ("mslm_core", "mslm_client"):
        assert (root / package / "py.typed").is_file(), package
        assert "py.typed" in data["package-data"][package], package


def test_a_job_option_is_declared_once():
    """Issue 32: a job option is a TrainConfig field marked ``job=True`` (its bounds beside
    it); the store's allow-list is JOB_OPTIONS, the API's JobCreate takes it with the field's
    bounds, and the client's JobParams (which imports nothing of ours) is kept equal here."""
    import dataclasses

    from api.schemas import JobCreate
    from mslm_client._endpoints import _EXPORT_KEYS, JobParams
    from mslm_core.config import JOB_OPTIONS, TrainConfig
    from store.jobs import JOB_FIELDS

    assert JOB_FIELDS == JOB_OPTIONS
    request_only = {"dataset_id", "datasets", "export", "idempotency_key"}
    assert set(JobCreate.model_fields) - request_only == set(JOB_OPTIONS)
    assert set(JobParams.__annotations__) - set(_EXPORT_KEYS) == set(JOB_OPTIONS)
    schema = JobCreate.model_json_schema()["properties"]
    for f in dataclasses.fields(TrainConfig):
        bounds = f.metadata.get("bounds")
        if f.name in JOB_OPTIONS and bounds is not None:  # the API refuses what TrainConfig does
            given = next(t for t in schema[f.name]["anyOf"] if t["type"] != "null")
            assert given.get("minimum") == bounds.ge, f.name
            assert given.get("exclusiveMinimum") == bounds.gt, f.name
            assert given.get("maximum") == bounds.le, f.name
            assert given.get("exclusiveMaximum") == bounds.lt, f.name
    # the REST reference lists every one of them
    docs = (Path(__file__).resolve().parents[1] / "docs" / "api.md").read_text()
    jobs_row = next(line for line in docs.splitlines() if line.startswith("| POST /v1/jobs |"))
    assert [o for o in sorted(JOB_OPTIONS) if f"`{o}`" not in jobs_row] == []


def test_the_client_s_annotate_options_are_the_api_s():
    """The client's option dicts (it imports nothing of ours) name every field of the request
    bodies besides those its calls take themselves: a field added to the API, ``style`` say,
    reaches ``mslm.annotate(…, style=…)`` and annotation jobs, or this fails."""
    from api.schemas import AnnotateRequest, AnnotationJobCreate
    from mslm_client._endpoints import AnnotateOptions, AnnotationJobOptions

    # texts: the call's argument; format: annotate's own argument (or annotate_pubtator);
    # labelstudio: what the Label Studio backend sends, not this client
    passed = {"texts", "format", "labelstudio"}
    assert set(AnnotateOptions.__annotations__) == set(AnnotateRequest.model_fields) - passed
    passed = {"source", "output"}  # create_annotation_job's arguments
    job_fields = set(AnnotationJobCreate.model_fields) - passed
    assert set(AnnotationJobOptions.__annotations__) == job_fields


def test_the_client_reads_every_field_the_api_answers():
    """Each of the client's answers (its own dataclasses: it imports nothing of ours) has
    the fields of the API's response model it is read from, no more and no fewer: a field
    added to an answer, a model's ``styles`` say, reaches the client's users or this fails."""
    import dataclasses

    from api import schemas as api
    from mslm_client import results as client

    pairs = {
        client.Cue: api.CueOut,
        client.Concept: api.ConceptOut,
        client.Entity: api.EntityOut,
        client.TextResult: api.TextResult,
        client.Relation: api.RelationOut,
        client.FactPart: api.FactPart,
        client.Medication: api.MedicationOut,
        client.Measurement: api.MeasurementOut,
        client.Facts: api.FactsOut,
        client.ServedModel: api.ServedModel,
        client.LinkedVocabulary: api.LinkedVocabulary,
        client.AnnotateResponse: api.AnnotateResponse,
        client.SplitFile: api.SplitFile,
        client.Dataset: api.DatasetOut,
        client.DatasetVersion: api.DatasetVersionOut,
        client.VersionChange: api.VersionChange,
        client.Suggestion: api.Suggestion,
        client.Suggestions: api.SuggestResponse,
        client.JobDataset: api.JobDatasetOut,
        client.Job: api.JobOut,
        client.Model: api.ModelDetail,
        client.Vocabulary: api.VocabularyOut,
        client.Linking: api.LinkingOut,
        client.Evaluation: api.EvaluationOut,
        client.NoteFile: api.NoteInputOut,
        client.AnnotationJob: api.AnnotationJobOut,
    }
    for ours, theirs in pairs.items():
        fields = {f.name for f in dataclasses.fields(ours)}
        assert fields == set(theirs.model_fields), (ours.__name__, theirs.__name__)
    # (an assertion's flags are read whatever they are: test_an_assertion_attribute_is_…)


def test_a_command_whose_package_is_left_out_does_not_break_the_cli(monkeypatch):
    """The service's images install the service but not the HTTP client: ``mslm`` there must
    still build its parser (found by the compose smoke: every container failed to start), while
    any other import error stays loud."""
    from importlib.metadata import EntryPoint

    from mslm_core import cli

    absent = EntryPoint("bulk", "package_not_here.cli:bulk", "mslm.commands")
    assert cli._command(absent) is None
    broken = EntryPoint("x", "mslm_core.not_a_module:x", "mslm.commands")
    with pytest.raises(ModuleNotFoundError):
        cli._command(broken)
    # without the client extra (httpx), `mslm bulk` says what to install; the rest works
    import subprocess
    import sys

    code = (
        "import builtins; real = builtins.__import__\n"
        "def guard(name, *a, **k):\n"
        "    if name.split('.')[0] == 'httpx': raise ModuleNotFoundError(name=name)\n"
        "    return real(name, *a, **k)\n"
        "builtins.__import__ = guard\n"
        "import sys; from mslm_core.cli import main\n"
        "sys.exit(main(sys.argv[1:]))"
    )
    run = [sys.executable, "-c", code]
    out = subprocess.run([*run, "bulk"], capture_output=True, text=True)
    assert out.returncode == 2 and "pip install 'mslm[client]'" in out.stderr, out.stderr
    out = subprocess.run([*run, "convert", "--help"], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
