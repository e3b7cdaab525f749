"""Owner accounts, invites, hosted bots: bots get a kind, a pause reason and an owner account;
bot versions get a status and what a hosted upload was; hosted runs keep their output.

Revision ID: 0002
Revises: 0001
Create Date: 2026-12-04

Existing bots become ``remote`` bots of no account (their free-text owner stays); their
current version is ``active`` and the earlier ones ``superseded``. Like 0001 it uses plain
SQLAlchemy types, never scout_ladder.models.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0002"
down_revision: str | Sequence[str] | None = "0001"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def _moment() -> sa.DateTime:
    return sa.DateTime(timezone=True)


def upgrade() -> None:
    op.create_table(
        "owners",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("name", sa.String(length=128), nullable=False),
        sa.Column("token_hash", sa.String(length=64), nullable=False),
        sa.Column("suspended_reason", sa.Text(), nullable=True),
        sa.Column("created_at", _moment(), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_owners")),
        sa.UniqueConstraint("name", name=op.f("uq_owners_name")),
        sa.UniqueConstraint("token_hash", name=op.f("uq_owners_token_hash")),
    )
    op.create_table(
        "invites",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("code_hash", sa.String(length=64), nullable=False),
        sa.Column("created_at", _moment(), nullable=False),
        sa.Column("used_at", _moment(), nullable=True),
        sa.Column("used_by", sa.Integer(), nullable=True),
        sa.ForeignKeyConstraint(["used_by"], ["owners.id"], name=op.f("fk_invites_used_by_owners")),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_invites")),
        sa.UniqueConstraint("code_hash", name=op.f("uq_invites_code_hash")),
    )
    with op.batch_alter_table("bots") as batch:
        batch.add_column(sa.Column("kind", sa.String(length=16), server_default="remote",
                                   nullable=False))
        batch.add_column(sa.Column("paused_reason", sa.Text(), nullable=True))
        batch.add_column(sa.Column("owner_id", sa.Integer(), nullable=True))
        batch.drop_constraint(op.f("ck_bots_version_positive"), type_="check")
        batch.create_check_constraint(op.f("ck_bots_version_not_negative"), "version >= 0")
        batch.create_check_constraint(op.f("ck_bots_kind_known"), "kind IN ('remote', 'hosted')")
        batch.create_foreign_key(op.f("fk_bots_owner_id_owners"), "owners", ["owner_id"], ["id"])
        batch.create_index(op.f("ix_bots_owner_id"), ["owner_id"])
    with op.batch_alter_table("bot_versions") as batch:
        batch.add_column(sa.Column("status", sa.String(length=16), server_default="active",
                                   nullable=False))
        batch.add_column(sa.Column("reason", sa.Text(), nullable=True))
        batch.add_column(sa.Column("validation_output", sa.Text(), nullable=True))
        batch.add_column(sa.Column("archive_sha256", sa.String(length=64), nullable=True))
        batch.add_column(sa.Column("archive_size", sa.Integer(), nullable=True))
        batch.add_column(sa.Column("runtime", sa.String(length=16), nullable=True))
        batch.add_column(sa.Column("command_json", sa.Text(), nullable=True))
        batch.add_column(sa.Column("decided_at", _moment(), nullable=True))
        batch.create_check_constraint(
            op.f("ck_bot_versions_status_known"),
            "status IN ('validating', 'active', 'rejected', 'superseded')")
        batch.create_index(op.f("ix_bot_versions_status"), ["status"])
    op.execute(
        "UPDATE bot_versions SET status = 'superseded' WHERE version < "
        "(SELECT bots.version FROM bots WHERE bots.id = bot_versions.bot_id)"
    )
    op.create_table(
        "hosted_runs",
        sa.Column("id", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), nullable=False),
        sa.Column("bot_id", sa.Integer(), nullable=False),
        sa.Column("match_id", sa.String(length=128), nullable=False),
        sa.Column("version", sa.Integer(), nullable=False),
        sa.Column("outcome_reason", sa.Text(), nullable=False),
        sa.Column("output_tail", sa.Text(), nullable=False),
        sa.Column("created_at", _moment(), nullable=False),
        sa.ForeignKeyConstraint(["bot_id"], ["bots.id"], name=op.f("fk_hosted_runs_bot_id_bots")),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_hosted_runs")),
        sa.UniqueConstraint("bot_id", "match_id", name=op.f("uq_hosted_runs_bot_id_match_id")),
    )


def downgrade() -> None:
    op.drop_table("hosted_runs")
    with op.batch_alter_table("bot_versions") as batch:
        batch.drop_index(op.f("ix_bot_versions_status"))
        batch.drop_constraint(op.f("ck_bot_versions_status_known"), type_="check")
        for column in ("decided_at", "command_json", "runtime", "archive_size",
                       "archive_sha256", "validation_output", "reason", "status"):
            batch.drop_column(column)
    with op.batch_alter_table("bots") as batch:
        batch.drop_index(op.f("ix_bots_owner_id"))
        batch.drop_constraint(op.f("fk_bots_owner_id_owners"), type_="foreignkey")
        batch.drop_constraint(op.f("ck_bots_kind_known"), type_="check")
        batch.drop_constraint(op.f("ck_bots_version_not_negative"), type_="check")
        batch.create_check_constraint(op.f("ck_bots_version_positive"), "version >= 1")
        for column in ("owner_id", "paused_reason", "kind"):
            batch.drop_column(column)
    op.drop_table("invites")
    op.drop_table("owners")
