"""vocabularies: concept vocabularies a site imports, and the one every replica links to

Revision ID: 0003
Revises: 0002
Create Date: 2026-11-23 21:30:00

A vocabulary (TSV or OBO) is checked and indexed at import; its folder under the artifacts
holds the file and the linker index. ``serving_state.active_vocabulary_id`` names the one
answers link to; null means the deployment's own (MSLM_VOCABULARY, by default the packaged
MeSH vocabulary).
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0003"
down_revision: str | Sequence[str] | None = "0002"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "vocabularies",
        sa.Column("id", sa.String(length=40), nullable=False),
        sa.Column("name", sa.String(length=200), nullable=False),
        sa.Column("filename", sa.String(length=200), nullable=False),
        sa.Column("format", sa.String(length=8), nullable=False),
        sa.Column("path", sa.String(length=400), nullable=False),
        sa.Column("sha256", sa.String(length=64), nullable=False),
        sa.Column("bytes", sa.BigInteger(), nullable=False),
        sa.Column("concepts", sa.Integer(), nullable=False),
        sa.Column("names", sa.Integer(), nullable=False),
        sa.Column("url_pattern", sa.String(length=400), nullable=False),
        sa.Column("source", sa.Text(), nullable=False),
        sa.Column("created_by", sa.String(length=40), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("id"),
    )
    with op.batch_alter_table("vocabularies") as batch:
        batch.create_index("ix_vocabularies_created_by", ["created_by"], unique=False)
    with op.batch_alter_table("serving_state") as batch:
        batch.add_column(sa.Column("active_vocabulary_id", sa.String(length=40), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("serving_state") as batch:
        batch.drop_column("active_vocabulary_id")
    with op.batch_alter_table("vocabularies") as batch:
        batch.drop_index("ix_vocabularies_created_by")
    op.drop_table("vocabularies")
