"""owners: datasets and models record the key that created them; idempotency keys per owner

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-23 16:40:00

Datasets and models gain ``created_by`` (the API key id, never the secret; jobs and evaluations
had it). A job's idempotency key was unique over every key's jobs — one key could find (and
block) another's — and is now unique per owner: ``(created_by, idempotency_key)``. Rows made
before this revision keep a null owner: only admin keys see them.
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0002"
down_revision: str | Sequence[str] | None = "0001"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

# the name PostgreSQL gave 0001's unnamed unique constraint; on SQLite batch mode reflects the
# table and this convention names it
NAMING = {"uq": "%(table_name)s_%(column_0_name)s_key"}


def upgrade() -> None:
    for table in ("datasets", "models"):
        with op.batch_alter_table(table) as batch:
            batch.add_column(sa.Column("created_by", sa.String(length=40), nullable=True))
            batch.create_index(f"ix_{table}_created_by", ["created_by"], unique=False)
    with op.batch_alter_table("jobs", naming_convention=NAMING) as batch:
        batch.drop_constraint("jobs_idempotency_key_key", type_="unique")
        batch.create_unique_constraint(
            "uq_jobs_owner_idempotency_key", ["created_by", "idempotency_key"]
        )
        batch.create_index("ix_jobs_created_by", ["created_by"], unique=False)
    with op.batch_alter_table("evaluations") as batch:
        batch.create_index("ix_evaluations_created_by", ["created_by"], unique=False)


def downgrade() -> None:
    with op.batch_alter_table("evaluations") as batch:
        batch.drop_index("ix_evaluations_created_by")
    with op.batch_alter_table("jobs", naming_convention=NAMING) as batch:
        batch.drop_index("ix_jobs_created_by")
        batch.drop_constraint("uq_jobs_owner_idempotency_key", type_="unique")
        batch.create_unique_constraint("jobs_idempotency_key_key", ["idempotency_key"])
    for table in ("models", "datasets"):
        with op.batch_alter_table(table) as batch:
            batch.drop_index(f"ix_{table}_created_by")
            batch.drop_column("created_by")
