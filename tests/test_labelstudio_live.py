"""Issue 33 part 1, against a REAL Label Studio server: ``label-studio`` 1.23.2 from its own
virtual environment (``scripts/labelstudio_env.sh``; its pins conflict with ours), started
here on SQLite in a temporary folder, driven with its own SDK (``label-studio-sdk``, the
version that server pins, which our dev extra installs too). Our API runs in uvicorn and a
real ``mslm worker`` trains.

From an empty project to a served model of its own: the project is made, our backend
connected as its ML backend (basic auth, the API key as password), tasks imported and their
pre-annotations fetched by Label Studio in one batch, Label Studio's uncertainty sampling
hands out the tasks in our active-learning order, annotations are submitted, its webhook
brings them to us, a job trains on them and its model is served — and Label Studio's next
pre-annotations come from it.

Skipped, loudly, only when the Label Studio environment could not be built."""

from __future__ import annotations

import contextlib
import os
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from service_helpers import (
    ADMIN,
    JOB,
    KEYS,
    TRAIN,
    auth,
    free_port,
    process_group,
    service_env,
    serving,
    upload_toy,
    wait_for,
)

VERSION = "1.23.2"
REPO = Path(__file__).resolve().parents[1]
CACHE = Path(os.environ.get("MSLM_CACHE") or Path.home() / ".cache" / "mslm")
VENV = CACHE / f"labelstudio-{VERSION}"
LS_KEY = "labelstudio-live-key-0123456789ab"
LS_TOKEN = "ls-live-token-0123456789abcdef01234567"
CONFIG = """<View>
  <Labels name="label" toName="text">
    <Label value="Disease"/><Label value="Chemical"/>
  </Labels>
  <Text name="text" value="$text"/>
</View>"""
NOTES = [
    "The patient has breast cancer .",
    "Aspirin reduces fever .",
    "No sign of diabetes or cancer today .",
    "Cisplatin caused renal failure .",
    "The patient has breast cancer today .",
    "Aspirin caused renal failure in the patient .",
]
TRAINING = {k: v for k, v in JOB.items() if k != "epochs"} | {"epochs": 3}

pytestmark = pytest.mark.timeout(900)


def _labelstudio_python() -> Path:
    """The Label Studio environment's python; waits for an install under way (CI starts
    it in the background early); skips LOUDLY when there is none."""
    installing = Path(f"{VENV}.installing")
    deadline = time.monotonic() + 900
    while installing.exists() and time.monotonic() < deadline:
        try:
            os.kill(int(installing.read_text().strip() or 0), 0)
        except (OSError, ValueError):
            break  # its installer is gone
        time.sleep(2)
    if not (VENV / ".mslm-ready").exists():
        why = (
            f"!!! The Label Studio {VERSION} environment is missing ({VENV}): "
            "bash scripts/labelstudio_env.sh could not build it (see its output; in CI: "
            f"{CACHE / 'labelstudio-env.log'}). "
            "The Label Studio ML backend was NOT tested against a real server."
        )
        sys.stderr.write(f"\n{why}\n")
        pytest.skip(why)
    return VENV / "bin" / "python"


@contextlib.contextmanager
def label_studio(python: Path, folder: Path) -> Iterator[tuple[str, Callable[[], None]]]:
    """Label Studio on SQLite in ``folder``, its admin's legacy token LS_TOKEN; no signup,
    no analytics, no Sentry; and allowed to call a backend on localhost (ML_BLOCK_LOCAL_IP,
    SSRF_PROTECTION_ENABLED: a deployment on a private network needs the same). Yields its
    URL at once (it takes a minute to migrate its database) and a wait for it to answer."""
    folder.mkdir(parents=True, exist_ok=True)
    port = free_port()
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": str(folder),
        "LABEL_STUDIO_BASE_DATA_DIR": str(folder / "data"),
        "LABEL_STUDIO_USERNAME": "annotator@example.org",
        "LABEL_STUDIO_PASSWORD": "a-long-password-for-the-test",
        "LABEL_STUDIO_USER_TOKEN": LS_TOKEN,
        "LABEL_STUDIO_DISABLE_SIGNUP_WITHOUT_LINK": "true",
        "COLLECT_ANALYTICS": "false",
        "SENTRY_DSN": "",
        "FRONTEND_SENTRY_DSN": "",
        "ML_BLOCK_LOCAL_IP": "false",
        "SSRF_PROTECTION_ENABLED": "false",
        "ML_TIMEOUT_SETUP": "30",
        "ML_TIMEOUT_HEALTH": "10",
    }
    args = [str(python), "-m", "label_studio.server", "start", "--no-browser"]
    args += ["--port", str(port), "--internal-host", "127.0.0.1"]
    args += ["--data-dir", str(folder / "data"), "--enable-legacy-api-token"]
    url = f"http://127.0.0.1:{port}"
    log = folder / "label-studio.log"
    with process_group(args, env, log) as proc:

        def up() -> bool:
            if proc.poll() is not None:
                raise AssertionError(f"Label Studio exited: {log.read_text()[-3000:]}")
            try:
                return httpx.get(f"{url}/health", timeout=5).status_code == 200
            except httpx.TransportError:
                return False

        yield url, lambda: wait_for(up, bool, timeout=300, every=1.0)


def _plain(item: Any) -> dict[str, Any]:
    """An SDK object (pydantic) as the JSON Label Studio sent."""
    return item if isinstance(item, dict) else dict(item.model_dump(mode="json"))


def _regions(text: str, spans: list[tuple[str, str]]) -> list[dict[str, object]]:
    out: list[dict[str, object]] = []
    for words, label in spans:
        start = text.index(words)
        value = {"start": start, "end": start + len(words), "text": words, "labels": [label]}
        out.append({"from_name": "label", "to_name": "text", "type": "labels", "value": value})
    return out


def test_label_studio_goes_from_an_empty_project_to_a_model_of_its_own(tmp_path, tiny_encoder):
    python = _labelstudio_python()
    from label_studio_sdk import LabelStudio

    from api.main import create_app
    from mslm_core.active import rank, uncertainties
    from mslm_settings import Settings

    env = service_env(tmp_path / "home", tiny_encoder)
    env["MSLM_API_KEYS"] = f"{KEYS},{LS_KEY}:admin"  # its models served: an admin act
    settings = Settings(**{k.removeprefix("MSLM_").lower(): v for k, v in env.items()})
    worker_env = {**os.environ, "HF_HUB_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false", **env}
    worker = [sys.executable, "-m", "mslm_core.cli", "worker"]
    ours = httpx.Client(timeout=60)
    app = create_app(settings)
    with (
        serving(app) as api,
        process_group(worker, worker_env, tmp_path / "worker.log"),
        label_studio(python, tmp_path / "ls") as (ls_url, ls_ready),
    ):
        ours.base_url = httpx.URL(api)
        # a first model, as an install has one: the toy corpus, trained by the worker
        first = ours.post(
            "/v1/jobs",
            headers=auth(TRAIN),
            json={"dataset_id": upload_toy(ours, tmp_path / "toy")["id"], **JOB},
        ).json()
        done = wait_for(
            lambda: ours.get(f"/v1/jobs/{first['id']}", headers=auth(TRAIN)).json(),
            lambda j: j["state"] in ("succeeded", "failed"),
            timeout=300,
        )
        assert done["state"] == "succeeded", done
        served = ours.post(f"/v1/models/{done['model_id']}/activate", headers=auth(ADMIN))
        assert served.status_code == 200, served.text  # a train key's model: an admin serves it
        wait_for(lambda: app.state.mslm.models.active_id, lambda m: m == done["model_id"])
        ls_ready()

        ls = LabelStudio(base_url=ls_url, api_key=LS_TOKEN)
        project = ls.projects.create(title="Our notes", label_config=CONFIG)
        backend = ls.ml.create(
            project=project.id,
            url=f"{api}/labelstudio",
            title="mslm",
            auth_method="BASIC_AUTH",
            basic_auth_user="labelstudio",
            basic_auth_pass=LS_KEY,
            extra_params={"train_every": 2, "params": TRAINING},
        )
        assert ls.ml.get(backend.id).state == "CO"  # connected: /health and /setup answered
        # Label Studio made a webhook to our /webhook itself; it sends no credentials until
        # it is given the key (docs/labelstudio.md, step 4)
        hooks = [h for h in ls.webhooks.list(project=str(project.id)) if "/labelstudio/" in h.url]
        assert [h.url for h in hooks] == [f"{api}/labelstudio/webhook"]
        ls.webhooks.update(hooks[0].id, headers={"Authorization": f"Bearer {LS_KEY}"})

        ls.projects.import_tasks(id=project.id, request=[{"text": t} for t in NOTES])
        tasks = sorted(ls.tasks.list(project=project.id), key=lambda t: t.id)
        ids = [t.id for t in tasks]
        assert [t.data["text"] for t in tasks] == NOTES
        # "Retrieve predictions" on every task: one /predict call with all of them
        ls.actions.create(id="retrieve_tasks_predictions", project=project.id)
        views = {i: ls.tasks.get(str(i)) for i in ids}
        predictions = {i: _plain(v.predictions[0]) for i, v in views.items()}
        model = done["model_id"]
        for i, note in zip(ids, NOTES, strict=True):
            p = predictions[i]
            assert p["model_version"] == model and 0.0 <= p["score"] <= 1.0
            for r in p["result"]:
                assert note[r["value"]["start"] : r["value"]["end"]] == r["value"]["text"]
                assert r["value"]["labels"][0] in ("Disease", "Chemical")
        found = [r["value"]["text"] for p in predictions.values() for r in p["result"]]
        assert "renal failure" in found or "breast cancer" in found, found

        # Label Studio's uncertainty sampling follows our ranking (lowest score first)
        extractor = app.state.mslm.models.active.pipeline.extractor
        order = rank(NOTES, uncertainties(extractor.predictor, NOTES, "least_confidence"))
        expected = [ids[s.index] for s in order]
        ls.projects.update(project.id, sampling="Uncertainty sampling", model_version=model)
        token = {"Authorization": f"Token {LS_TOKEN}"}

        def next_task() -> int:
            got = httpx.get(f"{ls_url}/api/projects/{project.id}/next", headers=token, timeout=60)
            assert got.status_code == 200, got.text
            return int(got.json()["id"])

        handed = []
        labels = {
            NOTES[0]: [("breast cancer", "Disease")],
            NOTES[1]: [("Aspirin", "Chemical"), ("fever", "Disease")],
            NOTES[2]: [("diabetes", "Disease"), ("cancer", "Disease")],
            NOTES[3]: [("Cisplatin", "Chemical"), ("renal failure", "Disease")],
            NOTES[4]: [("breast cancer", "Disease")],
            NOTES[5]: [("Aspirin", "Chemical"), ("renal failure", "Disease")],
        }
        for _ in range(2):  # two annotations: train_every=2 starts a job
            task_id = next_task()
            handed.append(task_id)
            note = NOTES[ids.index(task_id)]
            ls.annotations.create(id=task_id, result=_regions(note, labels[note]))
        assert handed == expected[:2]

        # our side: the project's dataset holds them, and a job trains on it (the key is an
        # admin's, which lists every key's jobs: the first model's is left out)
        def project_jobs() -> list[dict]:
            rows = ours.get("/v1/jobs", headers=auth(LS_KEY)).json()["data"]
            return [j for j in rows if j["id"] != first["id"]]

        jobs = wait_for(
            project_jobs,
            lambda rows: len(rows) == 1,
            timeout=60,
        )
        job = wait_for(
            lambda: ours.get(f"/v1/jobs/{jobs[0]['id']}", headers=auth(LS_KEY)).json(),
            lambda j: j["state"] in ("succeeded", "failed", "cancelled"),
            timeout=300,
        )
        assert job["state"] == "succeeded", job
        dataset = ours.get(f"/v1/datasets/{job['dataset_id']}", headers=auth(LS_KEY)).json()
        assert dataset["stats"]["train"]["sentences"] == 2
        # ... and its model is served: by the API, and in Label Studio's next pre-annotations
        new = job["model_id"]
        assert new != model
        served = ours.get("/v1/models", headers=auth(LS_KEY)).json()["data"]
        assert [m["id"] for m in served if m["active"]] == [new]
        wait_for(lambda: app.state.mslm.models.active_id, lambda m: m == new)
        added = ls.projects.import_tasks(
            id=project.id, request=[{"text": "Aspirin caused fever ."}], return_task_ids=True
        )
        fresh = ls.tasks.get(str(added.task_ids[0]))  # the task view asks the backend
        assert fresh.predictions and _plain(fresh.predictions[0])["model_version"] == new
        # Label Studio's "Start training" button: START_TRAINING to our /webhook
        ls.ml.train(backend.id)
        jobs = project_jobs()
        assert len(jobs) == 2 and jobs[0]["id"] != job["id"]
        ours.post(f"/v1/jobs/{jobs[0]['id']}/cancel", headers=auth(LS_KEY))
