"""Notes files record how their bytes were read as text

Revision ID: 0009
Revises: 0008
Create Date: 2026-12-03 23:20:00

``note_inputs.encoding``: the encoding a notes file was read in, and how it was told (given,
its byte-order mark, UTF-8, charset-normalizer's guess); null for Parquet and for files stored
before.
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = "0009"
down_revision: str | Sequence[str] | None = "0008"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    json_type = sa.JSON().with_variant(postgresql.JSONB(), "postgresql")
    with op.batch_alter_table("note_inputs") as batch:
        batch.add_column(sa.Column("encoding", json_type, nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("note_inputs") as batch:
        batch.drop_column("encoding")
