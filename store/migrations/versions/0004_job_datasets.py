"""job datasets: a job trains on one dataset or several, each with a type map and a weight;
an evaluation may map its dataset's types too

Revision ID: 0004
Revises: 0003
Create Date: 2026-11-25 03:00:00

``job_datasets`` lists the datasets of every job in order (issue 28: several corpora mapped
onto one schema), with the type map and the sampling weight each is trained with.
``jobs.dataset_id`` stays the first of them. Jobs made before this revision get their one
dataset as a row (empty map, weight 1). ``evaluations.type_map`` maps the evaluated dataset's
types onto the model's (empty: as uploaded).
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = "0004"
down_revision: str | Sequence[str] | None = "0003"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    json_type = sa.JSON().with_variant(postgresql.JSONB(), "postgresql")
    op.create_table(
        "job_datasets",
        sa.Column("job_id", sa.String(length=40), nullable=False),
        sa.Column("position", sa.Integer(), nullable=False),
        sa.Column("dataset_id", sa.String(length=40), nullable=True),
        sa.Column("type_map", json_type, nullable=False),
        sa.Column("weight", sa.Float(), nullable=False),
        sa.ForeignKeyConstraint(["job_id"], ["jobs.id"], ondelete="CASCADE"),
        sa.ForeignKeyConstraint(["dataset_id"], ["datasets.id"], ondelete="SET NULL"),
        sa.PrimaryKeyConstraint("job_id", "position"),
    )
    with op.batch_alter_table("job_datasets") as batch:
        batch.create_index("ix_job_datasets_dataset_id", ["dataset_id"], unique=False)
    op.execute(
        "INSERT INTO job_datasets (job_id, position, dataset_id, type_map, weight) "
        "SELECT id, 0, dataset_id, '{}', 1.0 FROM jobs"
    )
    with op.batch_alter_table("evaluations") as batch:
        batch.add_column(sa.Column("type_map", json_type, nullable=False, server_default="{}"))
    with op.batch_alter_table("evaluations") as batch:
        batch.alter_column("type_map", server_default=None)


def downgrade() -> None:
    with op.batch_alter_table("evaluations") as batch:
        batch.drop_column("type_map")
    with op.batch_alter_table("job_datasets") as batch:
        batch.drop_index("ix_job_datasets_dataset_id")
    op.drop_table("job_datasets")
