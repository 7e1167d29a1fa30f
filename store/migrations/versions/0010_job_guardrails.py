"""Fine-tuning guardrails and the first start's early model

Revision ID: 0010
Revises: 0009
Create Date: 2026-12-04 16:00:00

``jobs.warnings`` and ``models.warnings``: why a model is below its job's floor (it predicts
nothing on dev, or scores under ``min_dev_f1``); such a model is served only when an admin
forces it. ``jobs.replaces``: the job whose model this job's model replaces once it succeeds
(the first start's full model replacing its early one).
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = "0010"
down_revision: str | Sequence[str] | None = "0009"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    json_type = sa.JSON().with_variant(postgresql.JSONB(), "postgresql")
    for table in ("jobs", "models"):
        with op.batch_alter_table(table) as batch:
            batch.add_column(sa.Column("warnings", json_type, nullable=False, server_default="[]"))
        with op.batch_alter_table(table) as batch:
            batch.alter_column("warnings", server_default=None)
    with op.batch_alter_table("jobs") as batch:
        batch.add_column(sa.Column("replaces", sa.String(length=40), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("jobs") as batch:
        batch.drop_column("replaces")
    for table in ("jobs", "models"):
        with op.batch_alter_table(table) as batch:
            batch.drop_column("warnings")
