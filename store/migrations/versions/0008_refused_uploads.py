"""Refused uploads: a dataset, vocabulary or notes file the service read and refused still
counts toward its key's upload quota

Revision ID: 0008
Revises: 0007
Create Date: 2026-12-02 00:20:00

``refused_uploads`` holds when a key's upload was read and refused (its kind, never its
content): without it, a key could make the service read 100 MB files it then refused, without
end (issue 58 item 4).
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0008"
down_revision: str | Sequence[str] | None = "0007"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "refused_uploads",
        sa.Column("id", sa.String(length=40), nullable=False),
        sa.Column("kind", sa.String(length=16), nullable=False),
        sa.Column("created_by", sa.String(length=40), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("id"),
    )
    with op.batch_alter_table("refused_uploads") as batch:
        batch.create_index("ix_refused_uploads_created_by", ["created_by"], unique=False)


def downgrade() -> None:
    op.drop_table("refused_uploads")
