"""Notes exports as hospitals make them (issue 61, "any notes export"): CSV and TSV with
multi-line quoted notes, Parquet, and text in Latin-1, cp1252, UTF-16 or UTF-8 with a
byte-order mark — each read with no note lost or split, the encoding told and recorded, and
undecodable bytes reported by line and byte offset."""

from __future__ import annotations

import codecs
import json
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from service_helpers import ANNOTATE, auth, make_settings

from api.main import create_app
from mslm_core import charsets
from mslm_core.errors import ConfigError
from mslm_core.notes import Note, NoteProblem, detect_note_format, read_notes

# notes as an export holds them: a line break, a comma and quotes inside a note, accents
NOTES = [
    ("n-1", 'Fièvre à 39 °C,\nsans toux.\n"Douleur" thoracique: non.'),
    ("n-2", "Señora de 70 años con disnea; ECG normal."),
    ("n-3", "Patient denies chest pain.\r\nPlan: follow-up in 2 weeks."),
]


def _csv(delimiter: str = ",") -> str:
    def field(value: str) -> str:
        return '"' + value.replace('"', '""') + '"'

    rows = [f"note_id{delimiter}note_text"] + [f"{i}{delimiter}{field(t)}" for i, t in NOTES]
    return "\r\n".join(rows) + "\r\n"


def _read(path: Path, fmt: str) -> list[Note | NoteProblem]:
    return list(read_notes(path, fmt))


# -- the readers ---------------------------------------------------------------------------------
@pytest.mark.parametrize(("delimiter", "fmt"), [(",", "csv"), ("\t", "tsv")])
def test_csv_and_tsv_keep_multi_line_notes_whole(tmp_path, delimiter, fmt):
    path = tmp_path / "notes"
    path.write_text(_csv(delimiter), encoding="utf-8", newline="")
    assert detect_note_format(path) == fmt  # by the header naming a text column
    assert _read(path, fmt) == [Note(i, t) for i, t in NOTES]


def test_a_csv_without_an_id_column_numbers_its_records(tmp_path):
    path = tmp_path / "notes.csv"
    path.write_text('text,unit\n"a\nb",7\nc,8\n', encoding="utf-8")
    assert _read(path, "csv") == [Note("1", "a\nb"), Note("2", "c")]


def test_a_bad_record_is_a_problem_that_says_where_and_the_others_are_kept(tmp_path):
    path = tmp_path / "notes.csv"
    path.write_text('id,text\n1,"one\nnote"\n2,two,extra\n3,three\n', encoding="utf-8")
    read = _read(path, "csv")
    assert read[0] == Note("1", "one\nnote") and read[2] == Note("3", "three")
    assert read[1] == NoteProblem("record 2 (line 4)", "3 fields, the header 2", "2")


def test_a_csv_without_a_text_column_is_refused_naming_its_columns(tmp_path):
    path = tmp_path / "notes.csv"
    path.write_text("id,body\n1,x\n", encoding="utf-8")
    with pytest.raises(ConfigError, match=r"no text column .* 'id', 'body'"):
        _read(path, "csv")


def test_parquet_notes_are_read_with_their_ids_and_nulls_are_problems(tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    path = tmp_path / "export"
    ids = [i for i, _ in NOTES] + ["n-4"]
    texts = [t for _, t in NOTES] + [None]
    pq.write_table(pa.table({"note_id": ids, "note_text": texts}), path, row_group_size=2)
    assert detect_note_format(path) == "parquet"  # by its magic number
    read = list(read_notes(path, "parquet"))
    assert read[:3] == [Note(i, t) for i, t in NOTES]
    assert read[3] == NoteProblem("row 4", "column 'note_text': null, not a string", "n-4")


# -- encodings -----------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("encoding", "told", "by"),
    [
        ("latin-1", "cp1252", "charset-normalizer"),
        ("cp1252", "cp1252", "charset-normalizer"),
        ("utf-16", "utf-16", "bom"),
        ("utf-16-be", "utf-16", "bom"),  # the BOM written by hand below
        ("utf-8-sig", "utf-8-sig", "bom"),
        ("utf-8", "utf-8", "utf-8"),
    ],
)
def test_an_export_in_any_encoding_reads_as_written(tmp_path, encoding, told, by):
    text = _csv()
    data = text.encode(encoding)
    if encoding == "utf-16-be":
        data = codecs.BOM_UTF16_BE + data
    path = tmp_path / "notes.csv"
    path.write_bytes(data)
    found = charsets.detect(path)
    assert (found.name, found.detected_by) == (told, by)
    undecodable, count = charsets.to_utf8(path, tmp_path / "utf8", found.name)
    assert (undecodable, count) == ([], 0)
    assert _read(tmp_path / "utf8", "csv") == [Note(i, t) for i, t in NOTES]


def test_undecodable_bytes_are_reported_by_line_and_byte_and_read_as_replacement(tmp_path):
    data = "ligne une\nligne deux, café\n".encode() + b"mauvais \xff octet\n" + "ok é\n".encode()
    path = tmp_path / "notes.txt"
    path.write_bytes(data)
    found = charsets.detect(path)  # nearly all UTF-8: read as UTF-8, not guessed as cp125x
    assert (found.name, found.detected_by) == ("utf-8", "utf-8")
    assert found.confidence is not None and found.confidence < 1
    undecodable, count = charsets.to_utf8(path, tmp_path / "utf8", found.name)
    assert undecodable == [charsets.Undecodable(line=3, byte=data.index(b"\xff"))] and count == 1
    assert (tmp_path / "utf8").read_text(encoding="utf-8").splitlines()[2] == "mauvais \ufffd octet"


def test_undecodable_utf16_is_reported_too(tmp_path):
    data = "ab\ncd\n".encode("utf-16-le") + b"\x00\xd8" + "x\n".encode("utf-16-le")
    path = tmp_path / "notes.txt"
    path.write_bytes(data)
    undecodable, count = charsets.to_utf8(path, tmp_path / "utf8", "utf-16-le")
    assert undecodable == [charsets.Undecodable(line=3, byte=12)] and count == 1


def test_a_given_encoding_wins_and_an_unknown_one_is_refused(tmp_path):
    path = tmp_path / "notes.txt"
    path.write_bytes("café\n".encode())
    assert charsets.detect(path, "latin-1") == charsets.Encoding("iso8859-1", "given")
    with pytest.raises(ConfigError, match="'klingon': not an encoding Python knows"):
        charsets.detect(path, "klingon")


# -- through the API -----------------------------------------------------------------------------
@pytest.fixture(scope="module")
def client(tmp_path_factory, tiny_encoder):
    settings = make_settings(tmp_path_factory.mktemp("exports"), tiny_encoder)
    with TestClient(create_app(settings)) as c:
        yield c, settings


def _upload(c, name: str, data: bytes, **form: str):
    return c.post(
        "/v1/annotation-jobs/inputs",
        headers=auth(ANNOTATE),
        files={"file": (name, data)},
        data=form or None,
    )


def _stored(settings, answer: dict) -> list[tuple[str, str]]:
    path = next(settings.artifacts.rglob(f"{answer['id']}/notes.jsonl"))
    rows = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]
    return [(r["id"], r["text"]) for r in rows]


@pytest.mark.parametrize(
    ("name", "encoding", "told"),
    [
        ("export.csv", "latin-1", {"name": "cp1252", "detected_by": "charset-normalizer"}),
        ("export.csv", "utf-16", {"name": "utf-16", "detected_by": "bom"}),
        ("export.csv", "utf-8-sig", {"name": "utf-8-sig", "detected_by": "bom"}),
        ("export", "utf-8", {"name": "utf-8", "detected_by": "utf-8"}),  # told by its header
    ],
)
def test_uploaded_exports_lose_and_split_no_note(client, name, encoding, told):
    c, settings = client
    r = _upload(c, name, _csv().encode(encoding))
    assert r.status_code == 201, r.text
    body = r.json()
    assert body["format"] == "csv" and body["notes"] == len(NOTES)
    assert {k: body["encoding"][k] for k in told} == told
    assert _stored(settings, body) == NOTES
    warnings = [p for p in body["problems"] if p.get("warning")]
    guessed = told["detected_by"] == "charset-normalizer"
    assert [p["where"] for p in warnings] == (["file"] if guessed else [])
    assert len(body["problems"]) == len(warnings)  # nothing refused


def test_an_uploaded_parquet_export_and_a_given_encoding(client, tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    c, settings = client
    pq.write_table(
        pa.table({"id": [i for i, _ in NOTES], "text": [t for _, t in NOTES]}), tmp_path / "p"
    )
    r = _upload(c, "notes.parquet", (tmp_path / "p").read_bytes())
    assert r.status_code == 201, r.text
    assert r.json()["format"] == "parquet" and r.json()["encoding"] is None
    assert _stored(settings, r.json()) == NOTES
    # a cp1252 file said to be cp1252: read so, no guess, no warning
    r = _upload(c, "n.txt", "Ça va – oui\n".encode("cp1252"), encoding="cp1252")
    assert r.status_code == 201, r.text
    assert r.json()["encoding"] == {"name": "cp1252", "detected_by": "given", "confidence": None}
    assert r.json()["problems"] == [] and _stored(settings, r.json()) == [("1", "Ça va – oui")]


def test_undecodable_bytes_are_warnings_and_their_notes_are_kept(client):
    c, settings = client
    data = "id,text\n1,café ok\n2,".encode() + b"bad \xff byte\n" + "3,naïve\n".encode()
    r = _upload(c, "notes.csv", data)
    assert r.status_code == 201, r.text
    assert r.json()["notes"] == 3
    (warning,) = r.json()["problems"]
    assert warning["warning"] is True and warning["where"] == "line 3"
    offset = data.index(b"\xff")
    assert f"byte {offset}: not utf-8" in warning["reason"]
    assert _stored(settings, r.json())[1] == ("2", "bad \ufffd byte")


def test_a_bad_encoding_or_format_is_a_422_that_says_which(client):
    c, _ = client
    r = _upload(c, "n.txt", b"x\n", encoding="klingon")
    assert r.status_code == 422 and "not an encoding Python knows" in r.json()["detail"]
    r = _upload(c, "n.csv", b"id,body\n1,x\n")
    assert r.status_code == 422 and "no text column" in r.json()["detail"]


# -- what the API says of a body it cannot read --------------------------------------------------
def test_the_api_says_what_is_wrong_with_a_body_and_where(client):
    c, _ = client
    annotate = "/v1/annotate"
    headers = {**auth(ANNOTATE), "content-type": "application/json"}
    latin1 = '{"texts": ["fièvre"]}'.encode("latin-1")
    r = c.post(annotate, content=latin1, headers=headers)
    assert r.status_code == 400, r.text
    at = latin1.index(b"\xe8")
    assert r.json()["detail"].startswith(f"the body is not UTF-8 at byte {at} (line 1)")
    r = c.post(annotate, content=b'{"texts": ["a",\n ]}', headers=headers)
    assert r.status_code == 422
    (error,) = r.json()["errors"]
    assert error["field"] == "body" and error["message"].endswith("at line 2, column 2")
    assert error["message"] in r.json()["detail"]
    for sent, said in ((None, "with no Content-Type"), ("text/plain", "as text/plain")):
        bare = auth(ANNOTATE) | ({"content-type": sent} if sent else {})
        r = c.post(annotate, content=b'{"texts": ["a"]}', headers=bare)
        assert r.status_code == 422
        assert f"the body was sent {said}; send Content-Type: application/json" in r.text
    # JSON in UTF-16 is JSON all the same (json.loads tells it): read, and on to the model
    # (this install serves none yet)
    r = c.post(annotate, content='{"texts": ["fièvre"]}'.encode("utf-16"), headers=headers)
    assert r.status_code == 503 and "no model is active" in r.json()["detail"], r.text
