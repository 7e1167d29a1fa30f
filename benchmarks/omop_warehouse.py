"""An OMOP CDM v5.4 warehouse on PostgreSQL for tests and benchmarks: the official DDL
(``tests/fixtures/omop_cdm_5.4``, checked against its pinned sha256), a ``NOTE`` table of
synthetic clinical notes, and the few ``CONCEPT`` rows our linking and sections need.

    python benchmarks/omop_warehouse.py --notes 100000

prints, as one JSON object on its last line, the new database's URL and how long building and
filling it took (the database is kept: drop it when done).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import random
import time
import uuid
from pathlib import Path

import psycopg

DDL_DIR = Path(__file__).resolve().parents[1] / "tests" / "fixtures" / "omop_cdm_5.4"
COMMIT = "f853f6e39c61b4eb8b3e5287fd573a1ced36c0e4"
PINNED = {
    "OMOPCDM_postgresql_5.4_ddl.sql": (
        "ae99be6e79edfad5f17ef71edda176281b45e3aa9e400e7a9f829103f5ec4771"
    ),
    "OMOPCDM_postgresql_5.4_primary_keys.sql": (
        "ffe6cc10f04a713ea86825dccfc1d8b8a981ba6037fc69cb9df4c80ce2f1970d"
    ),
    "OMOPCDM_postgresql_5.4_indices.sql": (
        "8a3537f971c75e9e33c3d1d13b041d4e5de8532dc1607bc31349af3679a66eec"
    ),
    "OMOPCDM_postgresql_5.4_constraints.sql": (
        "dedae8072ef585e25e0ab2624f557e37e5ddd2d51e75810af58b02e990a4f293"
    ),
}
ADMIN = "postgresql://postgres@127.0.0.1:5432/postgres"

#: (vocabulary_id, concept_code, concept_id, standard_concept, name); 0 is the CDM's "No
#: matching concept". Two MeSH codes map to SNOMED standard concepts ('Maps to').
CONCEPTS = [
    ("None", "No matching concept", 0, None, "No matching concept"),
    ("MeSH", "D005334", 2000001, None, "Fever"),
    ("MeSH", "D011014", 2000002, None, "Pneumonia"),
    ("SNOMED", "386661006", 437663, "S", "Fever"),
    ("SNOMED", "233604007", 255848, "S", "Pneumonia"),
    ("LOINC", "10164-2", 3000001, "S", "History of Present illness Narrative"),
    ("LOINC", "11348-0", 3000002, "S", "History of Past illness Narrative"),
    ("LOINC", "10157-6", 3000003, "S", "History of family member diseases Narrative"),
    ("LOINC", "10160-0", 3000004, "S", "History of Medication use Narrative"),
    # what staged facts name (mslm_core.omop): the NLP type, operators, a route, units, a value
    ("Type Concept", "OMOP4976890", 32858, "S", "NLP"),
    ("Meas Value Operator", "4172703", 4172703, "S", "="),
    ("Meas Value Operator", "4171756", 4171756, "S", "<"),
    ("SNOMED", "26643006", 4132161, "S", "Oral"),
    ("UCUM", "mg", 8576, "S", "milligram"),
    ("UCUM", "ng/mL", 8842, "S", "nanogram per milliliter"),
    ("SNOMED", "10828004", 9191, "S", "Positive"),
]
MAPS_TO = [(2000001, 437663), (2000002, 255848)]


def verify_ddl() -> None:
    for name, digest in PINNED.items():
        got = hashlib.sha256((DDL_DIR / name).read_bytes()).hexdigest()
        if got != digest:
            raise SystemExit(f"{DDL_DIR / name}: sha256 {got}, pinned {digest} (commit {COMMIT})")


def _statements(name: str, schema: str) -> list[str]:
    sql = (DDL_DIR / name).read_text(encoding="utf-8").replace("@cdmDatabaseSchema", schema)
    lines = [ln for ln in sql.splitlines() if not ln.strip().startswith("--")]
    return [s.strip() for s in "\n".join(lines).split(";") if s.strip()]


def create_database(admin: str = ADMIN) -> str:
    """A new empty database; returns its psycopg URL."""
    name = f"omop_{uuid.uuid4().hex[:10]}"
    with psycopg.connect(admin, autocommit=True, connect_timeout=3) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    return f"{admin.rsplit('/', 1)[0]}/{name}"


def drop_database(url: str, admin: str = ADMIN) -> None:
    name = url.rsplit("/", 1)[1]
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def build_cdm(
    url: str,
    schema: str = "cdm",
    keyed: tuple[str, ...] = ("note_nlp", "drug_exposure", "measurement"),
) -> None:
    """The CDM's tables, primary keys and indices in ``schema``, the foreign keys of the
    tables ``keyed`` (what the service writes: each row it writes must name concepts, a
    person … that are there), and the concept rows of :data:`CONCEPTS`."""
    verify_ddl()
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(f"CREATE SCHEMA IF NOT EXISTS {schema}")
        for name in (
            "OMOPCDM_postgresql_5.4_ddl.sql",
            "OMOPCDM_postgresql_5.4_primary_keys.sql",
            "OMOPCDM_postgresql_5.4_indices.sql",
        ):
            for statement in _statements(name, schema):
                conn.execute(statement)
        with conn.cursor() as cur:
            for vocabulary, code, cid, standard, concept_name in CONCEPTS:
                cur.execute(
                    f"INSERT INTO {schema}.concept (concept_id, concept_name, domain_id, "
                    "vocabulary_id, concept_class_id, standard_concept, concept_code, "
                    "valid_start_date, valid_end_date) VALUES (%s, %s, 'Metadata', %s, "
                    "'Concept', %s, %s, '1970-01-01', '2099-12-31')",
                    (cid, concept_name, vocabulary, standard, code),
                )
            for a, b in MAPS_TO:
                cur.execute(
                    f"INSERT INTO {schema}.concept_relationship (concept_id_1, concept_id_2, "
                    "relationship_id, valid_start_date, valid_end_date) VALUES (%s, %s, "
                    "'Maps to', '1970-01-01', '2099-12-31')",
                    (a, b),
                )
        for statement in _statements("OMOPCDM_postgresql_5.4_constraints.sql", schema):
            if any(f"ALTER TABLE {schema}.{table} " in statement for table in keyed):
                conn.execute(statement)


PROBLEMS = ["fever", "pneumonia", "chest pain", "diabetes", "hypertension", "cough", "anemia"]
DRUGS = ["aspirin", "metformin", "lisinopril", "amoxicillin", "heparin", "insulin"]


def synthetic_note(rng: random.Random) -> str:
    a, b, c = rng.sample(PROBLEMS, 3)
    drug = rng.choice(DRUGS)
    return (
        f"HISTORY OF PRESENT ILLNESS: {rng.randint(20, 90)} year old patient with {a} and "
        f"{b}. Denies {c}. No evidence of {rng.choice(PROBLEMS)}.\n"
        f"PAST MEDICAL HISTORY: {rng.choice(PROBLEMS)}.\n"
        f"FAMILY HISTORY: mother had {rng.choice(PROBLEMS)}.\n"
        f"MEDICATIONS: {drug} {rng.choice([5, 10, 20, 81, 500])} mg daily. "
        f"Started on {rng.choice(DRUGS)} for possible {rng.choice(PROBLEMS)}."
    )


def fill_notes(url: str, n: int, schema: str = "cdm", seed: int = 0, first_id: int = 1) -> None:
    """``n`` synthetic notes, ids ``first_id``.. in ``schema.note`` (COPY)."""
    rng = random.Random(seed)
    columns = (
        "note_id, person_id, note_date, note_type_concept_id, note_class_concept_id, "
        "note_text, encoding_concept_id, language_concept_id"
    )
    with psycopg.connect(url) as conn, conn.cursor() as cur:
        with cur.copy(f"COPY {schema}.note ({columns}) FROM STDIN") as copy:
            for k in range(n):
                note_id = first_id + k
                copy.write_row(
                    (note_id, 1 + note_id % 997, "2026-01-01", 0, 0, synthetic_note(rng), 0, 0)
                )
        conn.commit()


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--notes", type=int, default=100_000)
    p.add_argument("--admin", default=ADMIN)
    args = p.parse_args()
    url = create_database(args.admin)
    started = time.perf_counter()
    build_cdm(url)
    built = time.perf_counter()
    fill_notes(url, args.notes)
    filled = time.perf_counter()
    print(
        json.dumps(
            {
                "url": url,
                "notes": args.notes,
                "build_cdm_s": round(built - started, 2),
                "fill_notes_s": round(filled - built, 2),
            }
        )
    )


if __name__ == "__main__":
    main()
