"""annotation jobs: bulk annotation of uploaded note files or warehouse queries, in chunks

Revision ID: 0005
Revises: 0004
Create Date: 2026-11-25 12:30:00

``note_inputs`` are uploaded note files, ``annotation_jobs`` the jobs and
``annotation_chunks`` the units the workers claim (issue 34).
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = "0005"
down_revision: str | Sequence[str] | None = "0004"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    json_type = sa.JSON().with_variant(postgresql.JSONB(), "postgresql")
    when = sa.DateTime(timezone=True)
    op.create_table(
        "note_inputs",
        sa.Column("id", sa.String(length=40), nullable=False),
        sa.Column("filename", sa.String(length=200), nullable=False),
        sa.Column("format", sa.String(length=16), nullable=False),
        sa.Column("path", sa.String(length=400), nullable=False),
        sa.Column("bytes", sa.BigInteger(), nullable=False),
        sa.Column("sha256", sa.String(length=64), nullable=False),
        sa.Column("notes", sa.Integer(), nullable=False),
        sa.Column("problems", json_type, nullable=False),
        sa.Column("created_by", sa.String(length=40), nullable=True),
        sa.Column("created_at", when, nullable=False),
        sa.PrimaryKeyConstraint("id"),
    )
    with op.batch_alter_table("note_inputs") as batch:
        batch.create_index("ix_note_inputs_created_by", ["created_by"], unique=False)
    op.create_table(
        "annotation_jobs",
        sa.Column("id", sa.String(length=40), nullable=False),
        sa.Column("state", sa.String(length=16), nullable=False),
        sa.Column("model_id", sa.String(length=80), nullable=False),
        sa.Column("source", json_type, nullable=False),
        sa.Column("output", json_type, nullable=False),
        sa.Column("params", json_type, nullable=False),
        sa.Column("chunk_size", sa.Integer(), nullable=False),
        sa.Column("total", sa.Integer(), nullable=True),
        sa.Column("chunks", sa.Integer(), nullable=True),
        sa.Column("created_by", sa.String(length=40), nullable=True),
        sa.Column("created_at", when, nullable=False),
        sa.Column("published_at", when, nullable=True),
        sa.Column("started_at", when, nullable=True),
        sa.Column("planned_at", when, nullable=True),
        sa.Column("finished_at", when, nullable=True),
        sa.Column("heartbeat_at", when, nullable=True),
        sa.Column("attempts", sa.Integer(), nullable=False),
        sa.Column("worker", sa.String(length=200), nullable=True),
        sa.Column("cancel_requested", sa.Boolean(), nullable=False),
        sa.Column("problems", json_type, nullable=False),
        sa.Column("error", sa.Text(), nullable=True),
        sa.PrimaryKeyConstraint("id"),
    )
    with op.batch_alter_table("annotation_jobs") as batch:
        batch.create_index("ix_annotation_jobs_state", ["state"], unique=False)
        batch.create_index("ix_annotation_jobs_created_by", ["created_by"], unique=False)
    op.create_table(
        "annotation_chunks",
        sa.Column("job_id", sa.String(length=40), nullable=False),
        sa.Column("seq", sa.Integer(), nullable=False),
        sa.Column("first", sa.BigInteger(), nullable=False),
        sa.Column("last", sa.BigInteger(), nullable=False),
        sa.Column("notes", sa.Integer(), nullable=False),
        sa.Column("state", sa.String(length=16), nullable=False),
        sa.Column("worker", sa.String(length=200), nullable=True),
        sa.Column("attempts", sa.Integer(), nullable=False),
        sa.Column("published_at", when, nullable=True),
        sa.Column("started_at", when, nullable=True),
        sa.Column("heartbeat_at", when, nullable=True),
        sa.Column("finished_at", when, nullable=True),
        sa.Column("done", sa.Integer(), nullable=False),
        sa.Column("entities", sa.Integer(), nullable=False),
        sa.Column("seconds", sa.Float(), nullable=False),
        sa.Column("errors", json_type, nullable=False),
        sa.Column("error", sa.Text(), nullable=True),
        sa.ForeignKeyConstraint(["job_id"], ["annotation_jobs.id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("job_id", "seq"),
    )
    with op.batch_alter_table("annotation_chunks") as batch:
        batch.create_index("ix_annotation_chunks_state", ["state"], unique=False)


def downgrade() -> None:
    op.drop_table("annotation_chunks")
    op.drop_table("annotation_jobs")
    op.drop_table("note_inputs")
