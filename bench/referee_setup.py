"""The set-up of bench/referee.py: its bots, time control, levels and run lengths.

Apart so that the modules of that benchmark (its child processes, its report) share them
without importing the script itself."""

from __future__ import annotations

from dataclasses import dataclass

CONCURRENCY = (1, 10, 100)
HEADLINE_CONCURRENCY = 100
RATIO_GOAL = 0.7
NUM_BOTS = 4
MAX_CLIENT_PROCESSES = 4
ADMIN_TOKEN = "bench-admin"
BOT_NAMES = tuple(f"b{i}" for i in range(NUM_BOTS))
DECISION_MS = 60_000
TIME_BANK_MS = 600_000
RAW_METHOD = "/bench.PingPong/Play"
SAMPLE_MATCH_ID = "m-0123456789ab"


@dataclass(frozen=True)
class Timing:
    raw_warmup: float
    raw_measure: float
    ref_warmup: float
    ref_measure: float


FULL = Timing(raw_warmup=1.5, raw_measure=12.0, ref_warmup=2.0, ref_measure=22.0)
QUICK = Timing(raw_warmup=0.5, raw_measure=2.0, ref_warmup=0.75, ref_measure=3.5)
PROFILE_FULL = Timing(0, 0, ref_warmup=2.0, ref_measure=12.0)
PROFILE_QUICK = Timing(0, 0, ref_warmup=1.0, ref_measure=5.0)
