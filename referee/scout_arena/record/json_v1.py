"""Format v1 of the match record on disk and on the wire: the only place that knows its keys.

`record_to_json` writes exactly the layout docs/record-format.md fixes (key order included, so
a record's bytes do not change); `record_from_json` reads it back into a `MatchRecord`.
Replay validates untrusted JSON field by field before it trusts anything (`replay.py`).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from scout_rules import Action, Card, End, MalformedAction, RoundEnd, Scout, ScoutAndShow, Show

from .model import JSON, MatchRecord, Note, RoundRecord

if TYPE_CHECKING:
    from _typeshed import ConvertibleToInt

RECORD_FORMAT = "scout-arena-match-record"
RECORD_VERSION = 1

_NOTE_KEYS = ("kind", "seat", "round", "action_index", "detail")


class RecordError(ValueError):
    """A record that cannot be read, or whose contents the engine does not reproduce."""


def action_to_json(action: Action) -> JSON:
    if isinstance(action, Show):
        return {"show": {"start": action.start, "length": action.length}}
    if isinstance(action, Scout):
        return {"scout": _scout_json(action)}
    return {"scout_and_show": {"scout": _scout_json(action.scout),
                               "show": {"start": action.show.start,
                                        "length": action.show.length}}}


def _scout_json(scout: Scout) -> JSON:
    return {"end": "left" if scout.end == End.LEFT else "right", "flip": scout.flip,
            "insert_at": scout.insert_at}


def _show_from(obj: object) -> Show:
    if not isinstance(obj, dict) or set(obj) != {"start", "length"}:
        raise MalformedAction(f"a show is {{'start', 'length'}}, got {obj!r}")
    start, length = obj["start"], obj["length"]
    if not all(isinstance(v, int) and not isinstance(v, bool) for v in (start, length)):
        raise MalformedAction(f"a show's start and length are integers, got {obj!r}")
    return Show(start, length)


def _scout_from(obj: object) -> Scout:
    if not isinstance(obj, dict) or set(obj) != {"end", "flip", "insert_at"}:
        raise MalformedAction(f"a scout is {{'end', 'flip', 'insert_at'}}, got {obj!r}")
    end = {"left": End.LEFT, "right": End.RIGHT}.get(obj["end"])
    pos = obj["insert_at"]
    if end is None or not isinstance(obj["flip"], bool) or not isinstance(pos, int) \
            or isinstance(pos, bool):
        raise MalformedAction(f"a scout has end 'left'/'right', a boolean flip and an integer "
                              f"insert_at, got {obj!r}")
    return Scout(end, obj["flip"], pos)


def action_from_json(obj: object) -> Action:
    """The engine action of a record entry's action part; MalformedAction if unreadable."""
    if not isinstance(obj, dict) or len(obj) != 1:
        raise MalformedAction(f"an action has exactly one of show/scout/scout_and_show: {obj!r}")
    ((kind, body),) = obj.items()
    if kind == "show":
        return _show_from(body)
    if kind == "scout":
        return _scout_from(body)
    if kind == "scout_and_show" and isinstance(body, dict) and set(body) == {"scout", "show"}:
        return ScoutAndShow(_scout_from(body["scout"]), _show_from(body["show"]))
    raise MalformedAction(f"unknown action {obj!r}")


def cards_json(cards: Sequence[Card]) -> list[list[int]]:
    return [[c.face, c.other] for c in cards]


def note_json(note: Note) -> JSON:
    return {"kind": note.kind, "seat": note.seat, "round": note.round,
            "action_index": note.action_index, "detail": note.detail, **note.extra}


def _round_json(entry: RoundRecord) -> JSON:
    out: JSON = {
        "index": entry.index,
        "starting_seat": entry.starting_seat,
        "dealt_hands": [cards_json(h) for h in entry.dealt_hands],
        "rotations": list(entry.rotations),
        "actions": [{"seat": seat, **action_to_json(a)} for seat, a in entry.actions],
    }
    if entry.scores is not None:
        out["end_reason"] = None if entry.end_reason is None else entry.end_reason.value
        out["exempt_seat"] = entry.exempt_seat
        out["scores"] = list(entry.scores)
    return out


def record_to_json(record: MatchRecord) -> JSON:
    """The JSON-ready dict of format v1."""
    return {
        "format": RECORD_FORMAT,
        "version": RECORD_VERSION,
        "match_id": record.match_id,
        "seed": record.seed,
        "num_players": record.num_players,
        "players": [{"seat": s, "name": name} for s, name in enumerate(record.players)],
        "rounds": [_round_json(r) for r in record.rounds],
        "finished": record.finished,
        "totals": None if record.totals is None else list(record.totals),
        "ranks": None if record.ranks is None else list(record.ranks),
        "forfeits": list(record.forfeits),
        "explicit_deals": None if record.explicit_deals is None
        else [[cards_json(h) for h in r] for r in record.explicit_deals],
        "notes": [note_json(n) for n in record.notes],
        "meta": dict(record.meta),
    }


def _cards(obj: Iterable[Sequence[ConvertibleToInt]]) -> tuple[Card, ...]:
    return tuple(Card(int(face), int(other)) for face, other in obj)


def _ints(obj: Iterable[ConvertibleToInt] | None) -> tuple[int, ...] | None:
    return None if obj is None else tuple(int(v) for v in obj)


def _note(obj: JSON) -> Note:
    extra = {k: v for k, v in obj.items() if k not in _NOTE_KEYS}
    return Note(str(obj["kind"]), int(obj["seat"]), int(obj["round"]), int(obj["action_index"]),
                str(obj["detail"]), extra)


def _round(obj: JSON) -> RoundRecord:
    actions = tuple((int(item["seat"]), action_from_json(
        {k: v for k, v in item.items() if k != "seat"})) for item in obj["actions"])
    has_result = "scores" in obj
    reason = obj.get("end_reason") if has_result else None
    return RoundRecord(
        index=int(obj["index"]), starting_seat=int(obj["starting_seat"]),
        dealt_hands=tuple(_cards(h) for h in obj["dealt_hands"]),
        rotations=tuple(None if r is None else bool(r) for r in obj["rotations"]),
        actions=actions,
        end_reason=None if reason is None else RoundEnd(reason),
        exempt_seat=obj.get("exempt_seat") if has_result else None,
        scores=_ints(obj["scores"]) if has_result else None,
    )


def record_from_json(obj: object) -> MatchRecord:
    """The typed record of a format-v1 dict; RecordError for another format or a layout this
    build cannot read (replay then says which step of the game does not hold)."""
    if not isinstance(obj, dict) or obj.get("format") != RECORD_FORMAT:
        found = obj.get("format") if isinstance(obj, dict) else type(obj).__name__
        raise RecordError(f"not a Scout Arena match record (format {found!r})")
    if obj.get("version") != RECORD_VERSION:
        raise RecordError(f"record version {obj.get('version')!r} is not supported "
                          f"(this build reads version {RECORD_VERSION})")
    try:
        players = tuple(str(p["name"]) for p in sorted(obj["players"], key=lambda p: p["seat"]))
        deals = obj.get("explicit_deals")
        meta = obj.get("meta") or {}
        return MatchRecord(
            match_id=obj.get("match_id"), seed=obj.get("seed"), players=players,
            rounds=tuple(_round(r) for r in obj["rounds"]),
            finished=bool(obj.get("finished")),
            totals=_ints(obj.get("totals")), ranks=_ints(obj.get("ranks")),
            forfeits=tuple(sorted(int(s) for s in obj.get("forfeits") or ())),
            explicit_deals=None if deals is None
            else tuple(tuple(_cards(h) for h in r) for r in deals),
            notes=tuple(_note(n) for n in obj.get("notes") or ()),
            meta=dict(meta) if isinstance(meta, dict) else {},
        )
    except (KeyError, TypeError, ValueError, AttributeError, MalformedAction) as exc:
        raise RecordError(f"record: unreadable layout ({type(exc).__name__}: {exc})") from exc


def dump_record(record: MatchRecord, path: str | Path) -> None:
    """Write atomically (temp file + rename), so a reader never sees half a record."""
    write_record_bytes(record_bytes(record), path)


def record_bytes(record: MatchRecord) -> bytes:
    """The record file's bytes. Compact: `json`'s C encoder only serves unindented output, and
    an indented record cost a referee ~6 ms of the interpreter per finished match."""
    return (json.dumps(record_to_json(record), separators=(",", ":")) + "\n").encode("utf-8")


def write_record_bytes(data: bytes, path: str | Path) -> None:
    """Write a record file's bytes atomically (temp file + rename): only system calls, so a
    thread doing it hardly needs the interpreter (see `Referee.store_record`)."""
    target = Path(path)
    tmp = target.with_name(f".{target.name}.tmp")
    tmp.write_bytes(data)
    tmp.replace(target)


def read_record_json(path: str | Path) -> JSON:
    """A record file's JSON object, unchecked beyond being an object (replay checks the rest)."""
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        reason = "not UTF-8 text" if isinstance(exc, UnicodeDecodeError) else exc
        raise RecordError(f"{path}: not a readable JSON record ({reason})") from exc
    if not isinstance(data, dict):
        raise RecordError(f"{path}: a record is a JSON object")
    return data


def load_record(path: str | Path) -> MatchRecord:
    """A record file as a typed record; RecordError if it is not a readable v1 record."""
    try:
        return record_from_json(read_record_json(path))
    except RecordError as exc:
        if str(exc).startswith(str(path)):
            raise
        raise RecordError(f"{path}: {exc}") from exc
