"""OMOP standard vocabularies for linking (issue 54): an Athena download's tables, or a
warehouse's, into a vocabulary of standard concepts per entity type, non-standard names kept
through "Maps to", streamed; the concepts answered with their OMOP ids; NOTE_NLP rows."""

from __future__ import annotations

import json
import os

import pytest

from mslm_core import cli
from mslm_core.errors import ConfigError
from mslm_core.linking import read_tsv
from mslm_core.linking.athena import DEFAULT_TYPES, AthenaFiles, omop_vocabulary, parse_types
from mslm_core.linking.builtin import load_linker

ENGLISH, FRENCH = "4180186", "4180190"
# (id, name, domain, vocabulary, class, standard, code, invalid)
CONCEPTS = [
    ("437663", "Fever", "Condition", "SNOMED", "Clinical Finding", "S", "386661006", ""),
    (
        "35211388",
        "Fever, unspecified",
        "Condition",
        "ICD10CM",
        "4-char billing code",
        "",
        "R50.9",
        "",
    ),
    (
        "3033745",
        "Troponin I.cardiac [Mass/volume] in Serum or Plasma",
        "Measurement",
        "LOINC",
        "Lab Test",
        "S",
        "10839-9",
        "",
    ),
    ("1307046", "metoprolol", "Drug", "RxNorm", "Ingredient", "S", "6918", ""),
    (
        "19019418",
        "metoprolol tartrate 25 MG Oral Tablet",
        "Drug",
        "RxNorm",
        "Clinical Drug",
        "S",
        "866514",
        "",
    ),
    (
        "4005764",
        "Upper lobe of right lung",
        "Spec Anatomic Site",
        "SNOMED",
        "Body Structure",
        "S",
        "45653009",
        "",
    ),
    ("4198190", "Appendectomy", "Procedure", "SNOMED", "Procedure", "S", "80146002", ""),
    ("4298794", "Smoker", "Observation", "SNOMED", "Clinical Finding", "S", "77176002", ""),
    ("4100000", "Old fever concept", "Condition", "SNOMED", "Clinical Finding", "S", "1", "D"),
    ("45000001", "Fever (Read)", "Condition", "Read", "Read", "", "F1", ""),
    ("4329041", 'Pain "severe"', "Condition", "SNOMED", "Clinical Finding", "S", "76948002", ""),
]
SYNONYMS = [
    ("437663", "Pyrexia", ENGLISH),
    ("437663", "Fièvre", FRENCH),
    ("437663", "Fever", ENGLISH),  # its own name: not repeated
    ("4005764", "Right upper lobe of lung", ENGLISH),
]
RELATIONSHIPS = [
    ("35211388", "437663", "Maps to", ""),
    ("45000001", "437663", "Maps to", ""),  # Read is not a source vocabulary: not kept
    ("35211388", "4100000", "Maps to", "D"),  # an invalid relationship
    ("19019418", "1307046", "RxNorm has ing", ""),
]
COLUMNS = {
    "CONCEPT": "concept_id concept_name domain_id vocabulary_id concept_class_id "
    "standard_concept concept_code valid_start_date valid_end_date invalid_reason",
    "CONCEPT_SYNONYM": "concept_id concept_synonym_name language_concept_id",
    "CONCEPT_RELATIONSHIP": "concept_id_1 concept_id_2 relationship_id valid_start_date "
    "valid_end_date invalid_reason",
}


def _rows() -> dict[str, list[list[str]]]:
    return {
        "CONCEPT": [[*c[:7], "19700101", "20991231", c[7]] for c in CONCEPTS],
        "CONCEPT_SYNONYM": [list(s) for s in SYNONYMS],
        "CONCEPT_RELATIONSHIP": [
            [a, b, r, "19700101", "20991231", i] for a, b, r, i in RELATIONSHIPS
        ],
    }


def athena_folder(folder, csv: bool = False):
    """The tables as an Athena download writes them (tab-separated, lower-case header, no
    quoting), or (``csv``) as the OHDSI example datasets do (commas, quotes, upper case)."""
    import csv as csvlib

    folder.mkdir(parents=True, exist_ok=True)
    for table, rows in _rows().items():
        header = COLUMNS[table].split()
        with open(folder / f"{table}.csv", "w", encoding="utf-8", newline="") as out:
            if csv:
                writer = csvlib.writer(out)
                writer.writerow([h.upper() for h in header])
                writer.writerows(rows)
            else:
                out.write("\t".join(header) + "\n")
                out.writelines("\t".join(r) + "\n" for r in rows)
    return folder


def test_an_athena_download_becomes_standard_concepts_per_type(tmp_path):
    tables = AthenaFiles(athena_folder(tmp_path / "athena"))
    counts = omop_vocabulary(tables, tmp_path / "omop.tsv")
    assert dict(counts.concepts) == {
        "Problem": 2,
        "Drug": 1,
        "Test": 1,
        "Procedure": 1,
        "Anatomy": 1,
    }
    assert counts.mapped == 1  # the ICD-10-CM fever; not Read's, not the invalid relationship
    vocabulary = read_tsv(tmp_path / "omop.tsv")
    assert set(vocabulary.concepts) == {
        "437663",
        "35211388",
        "3033745",
        "1307046",
        "4005764",
        "4198190",
        "4329041",
    }  # no clinical drug (not an ingredient), no observation, nothing invalid
    fever = vocabulary.concepts["437663"]
    assert (fever.code, fever.vocabulary, fever.parts) == (
        "386661006",
        "SNOMED",
        ("Condition:SNOMED:Clinical Finding",),
    )
    assert fever.synonyms == ["Pyrexia"]  # English only, its name once
    icd = vocabulary.concepts["35211388"]
    assert (icd.maps_to, icd.vocabulary, icd.code) == ("437663", "ICD10CM", "R50.9")
    assert vocabulary.concepts["4329041"].name == 'Pain "severe"'  # a quote kept as it is
    assert vocabulary.types["Drug"] == (
        "Drug:RxNorm:Ingredient",
        "Drug:RxNorm Extension:Ingredient",
    )
    assert vocabulary.types["Disease"] == vocabulary.types["Problem"]  # the corpora's types


def test_omop_concepts_are_linked_with_their_ids_and_codes(tmp_path):
    omop_vocabulary(AthenaFiles(athena_folder(tmp_path / "a")), tmp_path / "omop.tsv")
    linker = load_linker(tmp_path / "omop.tsv")
    asked = [
        ("pyrexia", "Problem"),
        ("Fever, unspecified", "Problem"),
        ("troponin I cardiac", "Test"),
        ("metoprolol", "Drug"),
        ("right upper lobe of lung", "Anatomy"),
        ("appendectomy", "Procedure"),
        ("fever", "Test"),
    ]
    found = linker.candidates([q for q, _ in asked], [t for _, t in asked])
    chosen = [linker.chosen(f, t) for (_, t), f in zip(asked, found, strict=True)]
    pyrexia, icd, troponin, drug, lobe, appendectomy, _ = chosen
    assert (pyrexia.id, pyrexia.concept_id, pyrexia.code, pyrexia.vocabulary) == (
        "437663",
        437663,
        "386661006",
        "SNOMED",
    )
    assert (icd.id, icd.source_id) == ("437663", "35211388")  # its ICD-10-CM name, mapped
    assert troponin.id == "3033745" and troponin.vocabulary == "LOINC"
    assert (drug.id, drug.vocabulary) == ("1307046", "RxNorm")
    assert lobe.id == "4005764" and appendectomy.id == "4198190"
    # a type is linked inside its domain only: no condition for a test
    assert all(c.id == "3033745" for c in found[-1])


def test_the_example_datasets_csv_reads_as_athena_s_tabs(tmp_path):
    omop_vocabulary(AthenaFiles(athena_folder(tmp_path / "tabs")), tmp_path / "a.tsv")
    omop_vocabulary(AthenaFiles(athena_folder(tmp_path / "csv", csv=True)), tmp_path / "b.tsv")
    a, b = ((tmp_path / n).read_text().splitlines() for n in ("a.tsv", "b.tsv"))
    assert a[1:] == b[1:]  # all but the provenance line, which names the folder


def test_a_table_or_column_missing_is_named(tmp_path):
    folder = athena_folder(tmp_path / "a")
    (folder / "CONCEPT_SYNONYM.csv").unlink()
    with pytest.raises(ConfigError, match=r"no CONCEPT_SYNONYM\.csv"):
        AthenaFiles(folder)
    folder = athena_folder(tmp_path / "b")
    (folder / "CONCEPT.csv").write_text("concept_id\tconcept_name\n1\tx\n", encoding="utf-8")
    with pytest.raises(ConfigError, match=r"CONCEPT\.csv:1: no column 'domain_id'"):
        omop_vocabulary(AthenaFiles(folder), tmp_path / "o.tsv")
    with pytest.raises(ConfigError, match="give TYPE=Domain"):
        parse_types("Problem=Condition")
    assert parse_types("Device=Device:SNOMED")["Device"].vocabularies == ("SNOMED",)
    assert parse_types("")["Drug"] == DEFAULT_TYPES["Drug"]


def test_the_command_writes_the_vocabulary(tmp_path, capsys):
    folder = athena_folder(tmp_path / "a")
    out = tmp_path / "omop.tsv"
    assert (
        cli.main(["vocab", "athena", str(folder), str(out), "--type", "Device=Device:SNOMED"]) == 0
    )
    summary = json.loads(capsys.readouterr().out)
    assert summary["concepts"]["Device"] == 0 and summary["mapped"] == 1
    assert read_tsv(out).types["Device"] == ("Device:SNOMED:",)


EUNOMIA = "Eunomia-Synthea27Nj/datasets/Synthea27Nj/Synthea27Nj_5.4.zip"


def _eunomia():
    from mslm_core.corpora.pinned import default_cache

    path = default_cache() / EUNOMIA
    if not path.is_file():
        pytest.skip(f"{path} is not fetched (mslm corpora fetch Eunomia-Synthea27Nj)")
    return path


def test_the_eunomia_vocabulary_subset_links_as_the_warehouse_codes_it(tmp_path):
    """OHDSI's openly published example (Synthea, pinned with its sha256): its own standard
    concepts, read straight from the zip, are what a note's mentions link to."""
    counts = omop_vocabulary(AthenaFiles(_eunomia()), tmp_path / "eunomia.tsv")
    assert counts.concepts["Problem"] > 200 and counts.concepts["Test"] > 150
    linker = load_linker(tmp_path / "eunomia.tsv")
    nausea, appendectomy, a1c = linker.link(
        ["nausea", "appendectomy", "hemoglobin A1c/hemoglobin total in blood"],
        ["Problem", "Procedure", "Test"],
    )
    assert (nausea.concept_id, nausea.vocabulary, nausea.code) == (31967, "SNOMED", "422587007")
    assert (appendectomy.concept_id, appendectomy.code) == (4198190, "80146002")
    assert (a1c.concept_id, a1c.vocabulary, a1c.code) == (3004410, "LOINC", "4548-4")


@pytest.fixture()
def vocabulary_warehouse():
    """A PostgreSQL warehouse whose cdm schema (the official CDM 5.4 DDL) holds the rows."""
    import psycopg
    from service_helpers import cdm_warehouse

    with cdm_warehouse() as url:
        with psycopg.connect(url) as conn:
            conn.execute("DELETE FROM cdm.concept_relationship")
            conn.execute("DELETE FROM cdm.concept")
            for row in _rows()["CONCEPT"]:
                conn.execute(
                    "INSERT INTO cdm.concept VALUES (%s, %s, %s, %s, %s, NULLIF(%s, ''), %s, "
                    "%s, %s, NULLIF(%s, ''))",
                    row,
                )
            for row in _rows()["CONCEPT_SYNONYM"]:
                conn.execute("INSERT INTO cdm.concept_synonym VALUES (%s, %s, %s)", row)
            for row in _rows()["CONCEPT_RELATIONSHIP"]:
                conn.execute(
                    "INSERT INTO cdm.concept_relationship VALUES (%s, %s, %s, %s, %s, "
                    "NULLIF(%s, ''))",
                    row,
                )
        yield url.replace("postgresql://", "postgresql+psycopg://")


def test_a_warehouse_s_vocabulary_tables_give_the_same_vocabulary(
    vocabulary_warehouse, tmp_path, tiny_encoder, capsys
):
    from service_helpers import make_settings

    from store.athena import WarehouseTables

    settings = make_settings(tmp_path, tiny_encoder, warehouses=f"omop={vocabulary_warehouse}")
    omop_vocabulary(WarehouseTables(settings, "omop", "cdm"), tmp_path / "w.tsv")
    omop_vocabulary(AthenaFiles(athena_folder(tmp_path / "a")), tmp_path / "f.tsv")
    w, f = ((tmp_path / n).read_text().splitlines() for n in ("w.tsv", "f.tsv"))
    assert w[1:] == f[1:]  # the same concepts, names, codes and mappings
    with pytest.raises(ConfigError, match="not in MSLM_WAREHOUSES"):
        WarehouseTables(settings, "other")
    with pytest.raises(ConfigError, match="letters, digits and _ only"):
        WarehouseTables(settings, "omop", "cdm; DROP TABLE x")
    # the import stores it for the service, named and linked with OMOP ids
    env = {"MSLM_HOME": str(tmp_path / "home"), "MSLM_WAREHOUSES": f"omop={vocabulary_warehouse}"}
    old = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    try:
        from mslm_settings import get_settings

        get_settings.cache_clear()
        capsys.readouterr()
        assert cli.main(["vocab", "import", "--warehouse", "omop", "--activate"]) == 0
        stored = json.loads(capsys.readouterr().out)
        assert (stored["name"], stored["concepts"], stored["active"]) == ("OMOP", 7, True)
    finally:
        for k, v in old.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
        get_settings.cache_clear()


def test_note_nlp_takes_an_omop_concept_s_own_ids():
    import datetime as dt

    from mslm_core import omop
    from mslm_core.types import Entity, LinkedConcept

    concept = LinkedConcept(
        "437663", "Fever", 1.0, "SNOMED", code="386661006", concept_id=437663, source_id="35211388"
    )
    e = Entity(0, 5, "fever", "Problem", 0.9, 0.9, 1.0, concept=concept, candidates=(concept,))
    row = omop.note_nlp_row(
        1,
        "fever",
        e,
        system="s",
        when=dt.datetime(2026, 12, 1, tzinfo=dt.UTC),
        concepts=lambda v, c: pytest.fail("an OMOP concept needs no lookup"),
        section_ids={},
    )
    assert row["note_nlp_concept_id"] == 437663 and row["note_nlp_source_concept_id"] == 35211388
    assert omop.parse_modifiers(row["term_modifiers"])["concept"] == "SNOMED:386661006"
