"""dataset versions: a dataset's train documents grow (added, replaced by id, removed), each
change a version; jobs record the version they trained on; unlabelled documents wait in a pool

Revision ID: 0006
Revises: 0005
Create Date: 2026-11-25 18:00:00

``dataset_versions`` holds every version of every dataset (issue 33); existing datasets get
their version 1 (as uploaded). ``datasets.version`` is the latest, ``datasets.pool`` its
unlabelled documents. ``job_datasets.version`` is the version a job trained on (NULL for
jobs made before this revision: they trained on version 1, the only one there was).
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = "0006"
down_revision: str | Sequence[str] | None = "0005"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    json_type = sa.JSON().with_variant(postgresql.JSONB(), "postgresql")
    with op.batch_alter_table("datasets") as batch:
        batch.add_column(sa.Column("version", sa.Integer(), nullable=False, server_default="1"))
        batch.add_column(sa.Column("pool", json_type, nullable=False, server_default="{}"))
    with op.batch_alter_table("datasets") as batch:
        batch.alter_column("version", server_default=None)
        batch.alter_column("pool", server_default=None)
    op.create_table(
        "dataset_versions",
        sa.Column("dataset_id", sa.String(length=40), nullable=False),
        sa.Column("version", sa.Integer(), nullable=False),
        sa.Column("created_by", sa.String(length=40), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("files", json_type, nullable=False),
        sa.Column("stats", json_type, nullable=False),
        sa.Column("types", json_type, nullable=False),
        sa.Column("pool", json_type, nullable=False),
        sa.Column("change", json_type, nullable=False),
        sa.Column("kept", sa.Boolean(), nullable=False),
        sa.ForeignKeyConstraint(["dataset_id"], ["datasets.id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("dataset_id", "version"),
    )
    op.execute(
        "INSERT INTO dataset_versions "
        "(dataset_id, version, created_by, created_at, files, stats, types, pool, change, kept) "
        "SELECT id, 1, created_by, created_at, files, stats, types, pool, "
        '\'{"source": "upload"}\', true FROM datasets'
    )
    with op.batch_alter_table("job_datasets") as batch:
        batch.add_column(sa.Column("version", sa.Integer(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("job_datasets") as batch:
        batch.drop_column("version")
    op.drop_table("dataset_versions")
    with op.batch_alter_table("datasets") as batch:
        batch.drop_column("pool")
        batch.drop_column("version")
