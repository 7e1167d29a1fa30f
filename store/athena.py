"""The OMOP vocabulary tables of a warehouse (one MSLM_WAREHOUSES names) as the rows
``mslm_core.linking.athena`` builds a linking vocabulary from: ``CONCEPT``,
``CONCEPT_SYNONYM`` and ``CONCEPT_RELATIONSHIP`` of a schema, read in read-only transactions
and streamed (server-side cursors), never held whole."""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence

from sqlalchemy import column, create_engine, select, table, text
from sqlalchemy.engine import Engine

from mslm_core.errors import ConfigError
from mslm_core.linking.athena import CONCEPT_COLUMNS, RELATIONSHIP_COLUMNS, SYNONYM_COLUMNS
from mslm_settings import Settings

#: Rows fetched from the server at a time.
FETCH = 10_000
_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,62}")


class WarehouseTables:
    """The vocabulary tables of ``schema`` in the warehouse ``name``."""

    def __init__(self, settings: Settings, name: str, schema: str = "cdm"):
        urls = settings.warehouse_map()
        if name not in urls:
            raise ConfigError(f"warehouse {name!r} is not in MSLM_WAREHOUSES ({sorted(urls)})")
        if not _IDENTIFIER.fullmatch(schema):
            raise ConfigError(f"schema {schema!r}: letters, digits and _ only")
        self.name, self.schema = name, schema
        self.engine: Engine = create_engine(urls[name], pool_pre_ping=True)

    def _rows(
        self, name: str, columns: Sequence[str], maps_to: bool = False
    ) -> Iterator[list[str]]:
        # built by SQLAlchemy, which quotes the (fixed) identifiers; no SQL text of ours
        source = table(name, *(column(c) for c in columns), schema=self.schema)
        query = select(*source.c)
        if maps_to:
            query = query.where(source.c.relationship_id == "Maps to")
        with self.engine.connect() as conn:
            conn.execute(text("SET TRANSACTION READ ONLY"))
            result = conn.execution_options(stream_results=True, yield_per=FETCH).execute(query)
            for row in result:
                yield ["" if v is None else str(v) for v in row]

    def concepts(self) -> Iterator[list[str]]:
        return self._rows("concept", CONCEPT_COLUMNS)

    def synonyms(self) -> Iterator[list[str]]:
        return self._rows("concept_synonym", SYNONYM_COLUMNS)

    def relationships(self) -> Iterator[list[str]]:
        # only "Maps to" is read: the table holds tens of millions of other relationships
        return self._rows("concept_relationship", RELATIONSHIP_COLUMNS, maps_to=True)

    def describe(self) -> str:
        return f"the vocabulary tables of warehouse {self.name}, schema {self.schema}"
