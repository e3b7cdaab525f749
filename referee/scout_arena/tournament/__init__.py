"""Local tournaments: bot programs against each other on one machine, cutechess-style.

One in-process referee on a free loopback port; every bot a subprocess that finds the referee
through the launch convention (SCOUT_ADDRESS, SCOUT_TOKEN, SCOUT_BOT_NAME, SCOUT_CONCURRENCY).
The schedule is a pure function of the configuration, results are computed from the saved
records in schedule order, so the same seed and deterministic bots give the same standings, and
``--resume`` can skip every match whose finished record is already on disk.

The same tournament runs on several nodes (``--nodes N`` local worker processes, or a Ray
cluster with ``--ray``): `distributed.play_distributed` cuts the schedule into chunks, each
played by a `Venue` (a referee and every bot on one machine), and brings the records back.
"""

from .config import (
    BUNDLED,
    CONFIG_FILE,
    SUMMARY_FILE,
    BotSpec,
    ScheduledMatch,
    TournamentConfig,
    TournamentDirError,
    deal_seed,
    load_config_file,
    schedule,
)
from .report import progress_bar, render_summary
from .runner import Tournament
from .standings import BotStats, compute_standings
from .summary import Standing, TournamentSummary
from .venue import BotProcess, Venue

__all__ = [
    "BUNDLED", "CONFIG_FILE", "SUMMARY_FILE", "BotProcess", "BotSpec", "BotStats",
    "ScheduledMatch", "Standing", "Tournament", "TournamentConfig", "TournamentDirError",
    "TournamentSummary", "Venue", "compute_standings", "deal_seed", "load_config_file",
    "progress_bar", "render_summary", "schedule",
]
