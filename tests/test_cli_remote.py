"""``mslm annotate --url`` (issue 61): the command asks a running service — its served model,
linking and context — and answers in the same formats as with a local bundle; its errors are
one line."""

from __future__ import annotations

import json

import pytest
from fastapi.testclient import TestClient
from service_helpers import ANNOTATE, import_and_serve, make_settings, serving

from api.main import create_app
from mslm_core import cli

TEXTS = ["The patient has breast cancer .", "No sign of diabetes today ."]


@pytest.fixture(scope="module")
def service(tmp_path_factory, tiny_encoder, toy_bundle):
    settings = make_settings(tmp_path_factory.mktemp("remote"), tiny_encoder)
    app = create_app(settings)
    with TestClient(app) as c:
        model_id = import_and_serve(c, settings, toy_bundle)
    with serving(create_app(settings)) as url:
        yield url, model_id


def _run(argv, capsys):
    code = cli.main(argv)
    return code, capsys.readouterr()


def test_the_service_answers_as_a_local_bundle_would(service, toy_bundle, tmp_path, capsys):
    url, model_id = service
    remote = ["annotate", "--url", url, "--api-key", ANNOTATE]
    code, out = _run([*remote, *TEXTS], capsys)
    assert code == 0, out.err
    answer = json.loads(out.out)
    assert answer["model"]["id"] == model_id
    code, out = _run(["annotate", "--model", str(toy_bundle), "--no-linking", *TEXTS], capsys)
    local = json.loads(out.out)
    spans = [[(e["start"], e["end"], e["type"]) for e in r["entities"]] for r in answer["results"]]
    assert spans == [
        [(e["start"], e["end"], e["type"]) for e in r["entities"]] for r in local["results"]
    ]
    assert any(spans)
    # a notes file: the results carry its ids, offsets into each note; more notes than a
    # request takes are sent in batches
    notes = tmp_path / "notes.jsonl"
    many = [(f"n{i}", TEXTS[i % 2]) for i in range(70)]
    notes.write_text("".join(json.dumps({"id": i, "text": t}) + "\n" for i, t in many))
    code, out = _run([*remote, "--notes", str(notes)], capsys)
    assert code == 0, out.err
    results = json.loads(out.out)["results"]
    assert [r["id"] for r in results] == [i for i, _ in many]
    for result, (_, text) in zip(results, many, strict=True):
        assert all(text[e["start"] : e["end"]] == e["text"] for e in result["entities"])
    # another format: as the service writes it
    code, out = _run([*remote, "--format", "pubtator", TEXTS[0]], capsys)
    assert code == 0 and out.out.startswith("0|t|The patient has breast cancer .")


def test_remote_errors_are_one_line(service, capsys, caplog):
    url, _ = service
    code, _ = _run(["annotate", "--url", url, "--api-key", "wrong-key-00000000000", "x"], capsys)
    assert code == 2 and "Traceback" not in caplog.text
    assert "not valid" in caplog.text or "401" in caplog.text
    code, _ = _run(["annotate", "--url", "http://127.0.0.1:9", "--api-key", ANNOTATE, "x"], capsys)
    assert code == 2 and "http://127.0.0.1:9" in caplog.text
    code, _ = _run(["annotate", "x"], capsys)
    assert code == 2 and "give --model DIR (a bundle) or --url URL" in caplog.text
