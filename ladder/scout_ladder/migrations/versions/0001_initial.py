"""The ladder's first schema: bots and their versions, matches and seats, ratings and their
history, challenges.

Revision ID: 0001
Revises:
Create Date: 2026-11-30

A migration is a frozen copy of the schema at one moment, so it uses plain SQLAlchemy types,
never the classes of scout_ladder.models (which will change): Seed is stored as String(20),
UtcDateTime as DateTime(timezone=True).
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0001"
down_revision: str | Sequence[str] | None = None
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def _moment() -> sa.DateTime:
    return sa.DateTime(timezone=True)


def upgrade() -> None:
    op.create_table(
        "bots",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("name", sa.String(length=64), nullable=False),
        sa.Column("owner", sa.String(length=128), nullable=False),
        sa.Column("version", sa.Integer(), nullable=False),
        sa.Column("token_hash", sa.String(length=64), nullable=False),
        sa.Column("retired", sa.Boolean(), nullable=False),
        sa.Column("created_at", _moment(), nullable=False),
        sa.Column("probation_reason", sa.Text(), nullable=True),
        sa.Column("probation_since", _moment(), nullable=True),
        sa.CheckConstraint("version >= 1", name=op.f("ck_bots_version_positive")),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_bots")),
        sa.UniqueConstraint("name", name=op.f("uq_bots_name")),
        sa.UniqueConstraint("token_hash", name=op.f("uq_bots_token_hash")),
    )
    op.create_table(
        "bot_versions",
        sa.Column("bot_id", sa.Integer(), nullable=False),
        sa.Column("version", sa.Integer(), nullable=False),
        sa.Column("registered_at", _moment(), nullable=False),
        sa.ForeignKeyConstraint(["bot_id"], ["bots.id"], name=op.f("fk_bot_versions_bot_id_bots")),
        sa.PrimaryKeyConstraint("bot_id", "version", name=op.f("pk_bot_versions")),
    )
    op.create_table(
        "challenges",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("owner", sa.String(length=128), nullable=False),
        sa.Column("bot_id", sa.Integer(), nullable=False),
        sa.Column("opponents_json", sa.Text(), nullable=False),
        sa.Column("games_requested", sa.Integer(), nullable=False),
        sa.Column("games_played", sa.Integer(), nullable=False),
        sa.Column("created_at", _moment(), nullable=False),
        sa.Column("status", sa.String(length=16), nullable=False),
        sa.CheckConstraint(
            "status IN ('open', 'done', 'cancelled')", name=op.f("ck_challenges_status_known")
        ),
        sa.CheckConstraint(
            "games_played >= 0", name=op.f("ck_challenges_games_played_not_negative")
        ),
        sa.CheckConstraint(
            "games_requested >= 1", name=op.f("ck_challenges_games_requested_positive")
        ),
        sa.ForeignKeyConstraint(["bot_id"], ["bots.id"], name=op.f("fk_challenges_bot_id_bots")),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_challenges")),
    )
    op.create_index(op.f("ix_challenges_status"), "challenges", ["status"])
    op.create_table(
        "ratings",
        sa.Column("bot_id", sa.Integer(), nullable=False),
        sa.Column("mu", sa.Float(), nullable=False),
        sa.Column("sigma", sa.Float(), nullable=False),
        sa.Column("games", sa.Integer(), nullable=False),
        sa.Column("updated_at", _moment(), nullable=False),
        sa.ForeignKeyConstraint(["bot_id"], ["bots.id"], name=op.f("fk_ratings_bot_id_bots")),
        sa.PrimaryKeyConstraint("bot_id", name=op.f("pk_ratings")),
    )
    op.create_table(
        "matches",
        sa.Column("id", sa.String(length=128), nullable=False),
        sa.Column("status", sa.String(length=16), nullable=False),
        sa.Column("table_size", sa.Integer(), nullable=False),
        # Unsigned 64-bit: BIGINT is signed, SQLite would turn it into a REAL.
        sa.Column("seed", sa.String(length=20), nullable=False),
        sa.Column("rated", sa.Boolean(), nullable=False),
        sa.Column("challenge_id", sa.Integer(), nullable=True),
        sa.Column("created_at", _moment(), nullable=False),
        sa.Column("finished_at", _moment(), nullable=True),
        sa.Column("void_reason", sa.Text(), nullable=True),
        sa.Column("record_json", sa.Text(), nullable=True),
        sa.CheckConstraint(
            "status IN ('in_flight', 'finished', 'void')", name=op.f("ck_matches_status_known")
        ),
        sa.CheckConstraint("table_size BETWEEN 2 AND 5", name=op.f("ck_matches_table_size_2_to_5")),
        sa.ForeignKeyConstraint(
            ["challenge_id"], ["challenges.id"], name=op.f("fk_matches_challenge_id_challenges")
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_matches")),
    )
    op.create_index(op.f("ix_matches_challenge_id"), "matches", ["challenge_id"])
    op.create_index(op.f("ix_matches_created_at"), "matches", ["created_at"])
    op.create_index(op.f("ix_matches_finished_at"), "matches", ["finished_at"])
    op.create_index(op.f("ix_matches_status"), "matches", ["status"])
    op.create_table(
        "match_seats",
        sa.Column("match_id", sa.String(length=128), nullable=False),
        sa.Column("seat", sa.Integer(), nullable=False),
        sa.Column("bot_id", sa.Integer(), nullable=False),
        sa.Column("bot_version", sa.Integer(), nullable=False),
        sa.Column("score", sa.Integer(), nullable=True),
        sa.Column("rank", sa.Integer(), nullable=True),
        sa.Column("forfeited", sa.Boolean(), nullable=False),
        sa.Column("timeouts", sa.Integer(), nullable=False),
        sa.Column("illegal_actions", sa.Integer(), nullable=False),
        sa.CheckConstraint("seat BETWEEN 0 AND 4", name=op.f("ck_match_seats_seat_0_to_4")),
        sa.ForeignKeyConstraint(
            ["bot_id", "bot_version"],
            ["bot_versions.bot_id", "bot_versions.version"],
            name=op.f("fk_match_seats_bot_id_bot_version_bot_versions"),
        ),
        sa.ForeignKeyConstraint(["bot_id"], ["bots.id"], name=op.f("fk_match_seats_bot_id_bots")),
        sa.ForeignKeyConstraint(
            ["match_id"], ["matches.id"], name=op.f("fk_match_seats_match_id_matches")
        ),
        sa.PrimaryKeyConstraint("match_id", "seat", name=op.f("pk_match_seats")),
        sa.UniqueConstraint("match_id", "bot_id", name=op.f("uq_match_seats_match_id_bot_id")),
    )
    op.create_index(op.f("ix_match_seats_bot_id"), "match_seats", ["bot_id"])
    op.create_table(
        "rating_history",
        sa.Column("id", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), nullable=False),
        sa.Column("bot_id", sa.Integer(), nullable=False),
        sa.Column("match_id", sa.String(length=128), nullable=False),
        sa.Column("mu", sa.Float(), nullable=False),
        sa.Column("sigma", sa.Float(), nullable=False),
        sa.Column("created_at", _moment(), nullable=False),
        sa.ForeignKeyConstraint(
            ["bot_id"], ["bots.id"], name=op.f("fk_rating_history_bot_id_bots")
        ),
        sa.ForeignKeyConstraint(
            ["match_id"], ["matches.id"], name=op.f("fk_rating_history_match_id_matches")
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_rating_history")),
        sa.UniqueConstraint("bot_id", "match_id", name=op.f("uq_rating_history_bot_id_match_id")),
    )
    op.create_index(op.f("ix_rating_history_match_id"), "rating_history", ["match_id"])


def downgrade() -> None:
    for table in (
        "rating_history",
        "match_seats",
        "matches",
        "ratings",
        "challenges",
        "bot_versions",
        "bots",
    ):
        op.drop_table(table)
