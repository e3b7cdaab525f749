"""Move generation and checking, as pure functions of what the acting player can see.

Everything here depends only on the acting player's own hand, the active set and the player's
own counters, so the same code serves the engine, the referee's decision requests and an
observation's `legal_actions()`. Group strength is packed in one int, ``length << 5 | set << 4 |
lowest``, so "beats" is a single integer comparison.

The generators a search calls most (`group_key`, `legal_shows`, `has_show`,
`legal_scout_and_shows`, `has_scout_and_show`) have C twins in the optional extension
``_speedups`` (built by setup.py where a compiler is present; see `_native`). When it is there
they replace the Python functions here, which stay the reference (`REFERENCE`); `COMPILED` says
which are in use.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from ._native import SPEEDUPS
from .actions import End, Scout, ScoutAndShow, Show
from .cards import Card, face_of
from .errors import IllegalAction, MalformedAction

SET_BIT = 16
NO_ACTIVE_SET = 0
#: Largest hand the tables below cover without falling back to building actions on the fly.
TABLE_SIZE = 64

# Move generation hands out shared, immutable action values instead of building new ones for
# every candidate: allocation was the largest cost of `legal_shows` and `legal_scouts`.
_SHOWS: list[list[Show]] = [[Show(i, n) for n in range(TABLE_SIZE + 1)]
                            for i in range(TABLE_SIZE)]
_SCOUT_LISTS: dict[tuple[int, int], tuple[Scout, ...]] = {}
_new_tuple = tuple.__new__  # a named tuple from all its fields, without its Python __new__


def _show(start: int, length: int) -> Show:
    if start < TABLE_SIZE and length <= TABLE_SIZE:
        return _SHOWS[start][length]
    return Show(start, length)


def _group_key(faces: Sequence[int]) -> int:
    """Strength of a valid group (a single card counts as a set), or -1 if not a set or run."""
    n = len(faces)
    if n == 0:
        return -1
    first = faces[0]
    if n == 1:
        return 32 | SET_BIT | first
    second = faces[1]
    if second == first:
        for f in faces:
            if f != first:
                return -1
        return n << 5 | SET_BIT | first
    step = second - first
    if step != 1 and step != -1:
        return -1
    prev = first
    for f in faces[1:]:
        if f - prev != step:
            return -1
        prev = f
    return n << 5 | (first if step == 1 else prev)


def describe_faces(faces: Sequence[int]) -> str:
    """'2-card set 3-3', '3-card run 4-5-6' or 'single 7', as a bot author reads a group."""
    key = group_key(faces)
    values = "-".join(map(str, faces))
    if len(faces) == 1:
        return f"single {values}"
    kind = "set" if key & SET_BIT else "run"
    return f"{len(faces)}-card {kind} {values}"


def _legal_shows(faces: Sequence[int], beat: int) -> list[Show]:
    """Every slice of the hand that is a set or run and whose strength exceeds ``beat``."""
    out: list[Show] = []
    append = out.append
    n = len(faces)
    shows = _SHOWS if n <= TABLE_SIZE else None
    for i in range(n):
        row = shows[i] if shows is not None else [Show(i, k) for k in range(n - i + 1)]
        f = faces[i]
        if 48 | f > beat:
            append(row[1])
        if i + 1 >= n:
            break
        g = faces[i + 1]
        if g == f:
            j = i + 1
            while j < n and faces[j] == f:
                length = j - i + 1
                if (length << 5 | SET_BIT | f) > beat:
                    append(row[length])
                j += 1
        elif g == f + 1:
            j = i + 1
            while j < n and faces[j] == f + (j - i):
                length = j - i + 1
                if (length << 5 | f) > beat:
                    append(row[length])
                j += 1
        elif g == f - 1:
            j = i + 1
            while j < n and faces[j] == f - (j - i):
                length = j - i + 1
                if (length << 5 | faces[j]) > beat:
                    append(row[length])
                j += 1
    return out


def _has_show(faces: Sequence[int], beat: int) -> bool:
    """Whether any Show beats ``beat``, stopping at the first one found."""
    n = len(faces)
    need = beat >> 5
    if need > n:
        return False
    for i in range(n):
        f = faces[i]
        if 48 | f > beat:
            return True
        j = i + 1
        if j < n:
            g = faces[j]
            step = g - f
            if step == 0 or step == 1 or step == -1:
                while j < n and faces[j] == f + step * (j - i):
                    length = j - i + 1
                    low = f if step >= 0 else faces[j]
                    if (length << 5 | (SET_BIT if step == 0 else 0) | low) > beat:
                        return True
                    j += 1
    return False


def scout_ends(active_size: int) -> tuple[End, ...]:
    """Ends a Scout may take from; a one-card active set has one distinct end (listed as LEFT)."""
    if active_size == 0:
        return ()
    return (End.LEFT,) if active_size == 1 else (End.LEFT, End.RIGHT)


def legal_scouts(hand_size: int, active_size: int) -> list[Scout]:
    """Every distinct Scout: each end, both ways round, into every gap (no chip check here)."""
    ends = 0 if active_size == 0 else (1 if active_size == 1 else 2)
    key = (ends, hand_size)
    cached = _SCOUT_LISTS.get(key)
    if cached is None:
        cached = tuple(Scout(end, flip, pos) for end in scout_ends(active_size)
                       for flip in (False, True) for pos in range(hand_size + 1))
        if hand_size <= TABLE_SIZE:
            _SCOUT_LISTS[key] = cached
    return list(cached)


def scouted_card(active: Sequence[Card], scout: Scout) -> Card:
    """The card a Scout takes, the way up it goes into the hand."""
    card = active[0] if scout.end == End.LEFT else active[-1]
    return Card(card.other, card.face) if scout.flip else card


def remaining_active(active: Sequence[Card], end: End) -> Sequence[Card]:
    return active[1:] if end == End.LEFT else active[:-1]


def _legal_scout_and_shows(faces: Sequence[int], active: Sequence[Card]) -> list[ScoutAndShow]:
    """Every Scout & Show: each Scout followed by each Show of the new hand that beats the rest."""
    out: list[ScoutAndShow] = []
    for end in scout_ends(len(active)):
        rest = remaining_active(active, end)
        beat = _group_key(tuple(map(face_of, rest))) if rest else NO_ACTIVE_SET
        taken = active[0] if end == End.LEFT else active[-1]
        for flip in (False, True):
            value = taken.other if flip else taken.face
            for pos in range(len(faces) + 1):
                new_faces = [*faces[:pos], value, *faces[pos:]]
                shows = _legal_shows(new_faces, beat)
                if shows:
                    scout = _new_tuple(Scout, (end, flip, pos))
                    out.extend([_new_tuple(ScoutAndShow, (scout, show)) for show in shows])
    return out


def _has_scout_and_show(faces: Sequence[int], active: Sequence[Card]) -> bool:
    for end in scout_ends(len(active)):
        rest = remaining_active(active, end)
        if not rest:
            return True
        beat = _group_key(tuple(map(face_of, rest)))
        taken = active[0] if end == End.LEFT else active[-1]
        for value in (taken.face, taken.other):
            for pos in range(len(faces) + 1):
                if _has_show([*faces[:pos], value, *faces[pos:]], beat):
                    return True
    return False


def _check_int(value: object, what: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise MalformedAction(f"{what} must be an integer, got {value!r}")
    return value


def check_show_shape(show: object, hand_size: int) -> Show:
    """Reject a Show that cannot be read against a hand of ``hand_size`` cards."""
    if not isinstance(show, Show):
        raise MalformedAction(f"expected a Show, got {show!r}")
    start = _check_int(show.start, "a Show's start position")
    length = _check_int(show.length, "a Show's length")
    if length < 1:
        raise MalformedAction(f"a Show needs at least one card; length {length} was given")
    if start < 0 or start + length > hand_size:
        last = start + length - 1
        raise MalformedAction(
            f"positions {start}-{last} are outside your hand of {hand_size} cards "
            f"(positions 0-{hand_size - 1})"
        )
    return show


def check_show(faces: Sequence[int], show: Show, active_faces: Sequence[int]) -> None:
    """Raise IllegalAction unless the (well-formed) Show is a group that beats the active set."""
    played = faces[show.start : show.start + show.length]
    key = group_key(played)
    if key < 0:
        cards = ",".join(map(str, played))
        raise IllegalAction(
            f"cards {cards} at positions {show.start}-{show.start + show.length - 1} "
            "are neither a set nor a run"
        )
    if active_faces:
        beat = group_key(active_faces)
        if key <= beat:
            raise IllegalAction(
                f"a {describe_faces(played)} does not beat the active "
                f"{describe_faces(active_faces)}"
            )


def check_scout_shape(scout: object, hand_size: int) -> Scout:
    if not isinstance(scout, Scout):
        raise MalformedAction(f"expected a Scout, got {scout!r}")
    if scout.end not in (End.LEFT, End.RIGHT) or isinstance(scout.end, bool):
        raise MalformedAction(f"a Scout's end must be LEFT (0) or RIGHT (1), got {scout.end!r}")
    if not isinstance(scout.flip, bool):
        raise MalformedAction(f"a Scout's flip must be true or false, got {scout.flip!r}")
    pos = _check_int(scout.insert_at, "a Scout's insert position")
    if not 0 <= pos <= hand_size:
        raise MalformedAction(
            f"insert position {pos} is outside 0-{hand_size} for a hand of {hand_size} cards"
        )
    return scout


Generators = dict[str, Callable[..., object]]

#: The pure-Python generators, named as in the API: the reference the C twins are held to.
REFERENCE: Generators = {
    "group_key": _group_key,
    "legal_shows": _legal_shows,
    "has_show": _has_show,
    "legal_scout_and_shows": _legal_scout_and_shows,
    "has_scout_and_show": _has_scout_and_show,
}


COMPILED = SPEEDUPS is not None
"""Whether the C move generators are in use (see the module's docstring)."""

group_key: Callable[[Sequence[int]], int] = _group_key
legal_shows: Callable[[Sequence[int], int], list[Show]] = _legal_shows
has_show: Callable[[Sequence[int], int], bool] = _has_show
legal_scout_and_shows: Callable[[Sequence[int], Sequence[Card]], list[ScoutAndShow]] = (
    _legal_scout_and_shows)
has_scout_and_show: Callable[[Sequence[int], Sequence[Card]], bool] = _has_scout_and_show
if SPEEDUPS is not None:
    SPEEDUPS.setup(Show, Scout, ScoutAndShow, End.LEFT, End.RIGHT, _legal_shows, _has_show,
                   _legal_scout_and_shows, _has_scout_and_show, _group_key)
    group_key = SPEEDUPS.group_key
    legal_shows = SPEEDUPS.legal_shows
    has_show = SPEEDUPS.has_show
    legal_scout_and_shows = SPEEDUPS.legal_scout_and_shows
    has_scout_and_show = SPEEDUPS.has_scout_and_show
