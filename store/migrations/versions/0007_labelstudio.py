"""Label Studio projects: the projects that use this service as their ML backend; a job may
ask for its model to be served once it succeeds

Revision ID: 0007
Revises: 0006
Create Date: 2026-11-25 18:30:00

``labelstudio_projects`` holds, per Label Studio project and API key, what its labelling
config names, the dataset its annotations make and when it trains next (issue 33).
``jobs.activate``: the job's model is made the served one when the job succeeds.
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = "0007"
down_revision: str | Sequence[str] | None = "0006"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    json_type = sa.JSON().with_variant(postgresql.JSONB(), "postgresql")
    when = sa.DateTime(timezone=True)
    with op.batch_alter_table("jobs") as batch:
        batch.add_column(
            sa.Column("activate", sa.Boolean(), nullable=False, server_default=sa.false())
        )
    with op.batch_alter_table("jobs") as batch:
        batch.alter_column("activate", server_default=None)
    op.create_table(
        "labelstudio_projects",
        sa.Column("id", sa.String(length=40), nullable=False),
        sa.Column("project", sa.String(length=100), nullable=False),
        sa.Column("key_id", sa.String(length=40), nullable=False),
        sa.Column("dataset_id", sa.String(length=40), nullable=True),
        sa.Column("from_name", sa.String(length=200), nullable=False),
        sa.Column("to_name", sa.String(length=200), nullable=False),
        sa.Column("text_key", sa.String(length=200), nullable=False),
        sa.Column("labels", json_type, nullable=False),
        sa.Column("train_every", sa.Integer(), nullable=False),
        sa.Column("since_job", sa.Integer(), nullable=False),
        sa.Column("last_job_id", sa.String(length=40), nullable=True),
        sa.Column("params", json_type, nullable=False),
        sa.Column("serve", sa.Boolean(), nullable=False),
        sa.Column("strategy", sa.String(length=32), nullable=False),
        sa.Column("diversity", sa.Float(), nullable=False),
        sa.Column("annotations", json_type, nullable=False),
        sa.Column("created_at", when, nullable=False),
        sa.Column("updated_at", when, nullable=False),
        sa.ForeignKeyConstraint(["dataset_id"], ["datasets.id"], ondelete="SET NULL"),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("project", "key_id", name="uq_labelstudio_projects_project_key"),
    )
    with op.batch_alter_table("labelstudio_projects") as batch:
        batch.create_index("ix_labelstudio_projects_key_id", ["key_id"], unique=False)
        batch.create_index("ix_labelstudio_projects_dataset_id", ["dataset_id"], unique=False)


def downgrade() -> None:
    op.drop_table("labelstudio_projects")
    with op.batch_alter_table("jobs") as batch:
        batch.drop_column("activate")
