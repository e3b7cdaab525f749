"""Match records: typed values the referee produces and the apps consume (`model`), format v1
as JSON at the file and wire edge (`json_v1`), and replay through the engine (`replay`)."""

from .account import format_match
from .json_v1 import (
    RECORD_FORMAT,
    RECORD_VERSION,
    RecordError,
    action_from_json,
    action_to_json,
    dump_record,
    load_record,
    read_record_json,
    record_bytes,
    record_from_json,
    record_to_json,
    write_record_bytes,
)
from .model import (
    JSON,
    MatchOutcome,
    MatchRecord,
    Note,
    RecordStatus,
    RefereeMeta,
    RoundRecord,
    SeatStats,
    build_record,
)
from .notation import describe_action, describe_round, seat_labels
from .replay import ReplayResult, ReplayStep, replay

__all__ = [
    "JSON", "RECORD_FORMAT", "RECORD_VERSION", "MatchOutcome", "MatchRecord", "Note",
    "RecordError", "RecordStatus", "RefereeMeta", "ReplayResult", "ReplayStep", "RoundRecord",
    "SeatStats",
    "action_from_json", "action_to_json", "build_record", "describe_action", "describe_round",
    "dump_record", "format_match",
    "load_record", "read_record_json", "record_bytes", "record_from_json", "record_to_json",
    "replay", "seat_labels", "write_record_bytes",
]
