"""The soak's figures (records, logs, memory, GC pauses and loop lag from the scraped
metrics) and the table it prints."""

from __future__ import annotations

import json
import math
import urllib.request
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from rich.console import Console
from rich.table import Table
from soak_keeper import MAX_CREATING
from trivial_bot import JSON


def linear_fit(xs: Sequence[float], ys: Sequence[float]) -> tuple[float, float] | None:
    """Least-squares slope and intercept, or None with fewer than 3 distinct xs."""
    if len(set(xs)) < 3:
        return None
    n = len(xs)
    mx, my = sum(xs) / n, sum(ys) / n
    sxx = sum((x - mx) ** 2 for x in xs)
    sxy = sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True))
    slope = sxy / sxx
    return slope, my - slope * mx


@dataclass
class Sample:
    at: float
    rss_kb: int
    finished: int
    running: int


def running_at_once(samples: list[Sample], t0: float, t1: float, asked: int) -> JSON | None:
    """How many matches really ran at once in the window: matches that end faster than
    CreateMatch replaces them leave fewer running than ``--matches`` asked for."""
    window = [s.running for s in samples if t0 <= s.at <= t1]
    if not window:
        return None
    mean = sum(window) / len(window)
    return {
        "mean": round(mean, 1),
        "min": min(window),
        "max": max(window),
        "asked": asked,
        "short": mean < 0.9 * asked,
    }


def read_records(folder: Path, bank_ms: int) -> JSON:
    """Time-bank draws, time losses and forfeits over every record: the finished ones and
    those aborted when the referee stopped. Both count: the longest matches are the ones still
    running at the stop, and their seats' clocks were kept as strictly until then."""
    figures: Counter[str] = Counter()
    notes: Counter[str] = Counter()
    statuses: Counter[str] = Counter()
    drew_by_status: Counter[str] = Counter()
    bank_used: list[int] = []
    for path in folder.glob("*.json"):
        try:
            record = json.loads(path.read_text())
        except (OSError, ValueError):
            figures["unreadable_records"] += 1
            continue
        meta = record.get("meta", {})
        statuses[str(meta.get("status"))] += 1
        if record.get("finished"):
            figures["finished_records"] += 1
        figures["actions"] += sum(len(r.get("actions", [])) for r in record.get("rounds", []))
        for seat in meta.get("seats", []):
            figures["seats"] += 1
            used = bank_ms - int(seat.get("time_bank_ms", bank_ms))
            if used > 0:
                figures["seats_that_drew_on_the_bank"] += 1
                drew_by_status[str(meta.get("status"))] += 1
                bank_used.append(used)
            figures["timeouts"] += int(seat.get("timeouts", 0))
            figures["strikes"] += int(seat.get("strikes", 0))
            figures["illegal_actions"] += int(seat.get("illegal_actions", 0))
            if seat.get("forfeited"):
                figures["forfeited_seats"] += 1
        for note in record.get("notes", []):
            notes[str(note.get("kind"))] += 1
    bank_used.sort()
    return {
        **figures,
        "notes_by_kind": dict(notes),
        "records_by_status": dict(statuses),
        "drew_on_the_bank_by_status": dict(drew_by_status),
        "bank_drawn_ms": {
            "total": sum(bank_used),
            "p50": bank_used[len(bank_used) // 2] if bank_used else 0,
            "max": bank_used[-1] if bank_used else 0,
        },
    }


def log_problems(path: Path) -> JSON:
    try:
        lines = path.read_text(errors="replace").splitlines()
    except OSError:
        return {"lines": 0, "examples": []}
    bad = [
        line
        for line in lines
        if any(w in line for w in ("Traceback", "ERROR", "crashed", "Exception"))
    ]
    return {"lines": len(bad), "examples": bad[:8]}


def rss_figures(samples: list[Sample], idle_kb: int, hwm_kb: int, window_end: float) -> JSON:
    steady = [s for s in samples if s.finished > 0 and s.at <= window_end]
    fit = linear_fit([s.finished for s in steady], [s.rss_kb for s in steady])
    last = samples[-1] if samples else None
    out: JSON = {
        "idle_mb": idle_kb / 1024,
        "peak_mb_vmhwm": hwm_kb / 1024,
        "peak_mb_sampled": max((s.rss_kb for s in samples), default=0) / 1024,
        "final_mb": last.rss_kb / 1024 if last else None,
        "fit_kb_per_finished_match": fit[0] if fit else None,
        "fit_samples": len(steady),
        "samples": [
            [round(s.at - samples[0].at, 2), s.rss_kb, s.finished, s.running] for s in samples
        ],
    }
    after_1000 = next((s for s in samples if s.finished >= 1000), None)
    if after_1000 is not None and last is not None and last.finished - after_1000.finished >= 200:
        out["after_first_1000"] = {
            "rss_mb_at_1000": after_1000.rss_kb / 1024,
            "finished_at_1000": after_1000.finished,
            "rss_mb_last": last.rss_kb / 1024,
            "finished_last": last.finished,
            "kb_per_match": (last.rss_kb - after_1000.rss_kb)
            / (last.finished - after_1000.finished),
        }
    return out


def scrape(url: str) -> str:
    """The referee's metrics page (Prometheus text format)."""
    body: bytes = urllib.request.urlopen(url, timeout=10).read()
    return body.decode()


def bucket_bound(line: str) -> float:
    """The upper bound (``le``) of a histogram bucket's line."""
    bound = line.split('le="', 1)[1].split('"', 1)[0]
    return math.inf if bound == "+Inf" else float(bound)


def gc_histograms(text: str) -> dict[str, JSON]:
    """The referee's scout_gc_pause_seconds by generation, from a scraped metrics page:
    cumulative bucket counts by upper bound, count and sum."""
    out: dict[str, JSON] = {}
    for line in text.splitlines():
        if not line.startswith("scout_gc_pause_seconds"):
            continue
        generation = line.split('generation="', 1)[1].split('"', 1)[0]
        value = float(line.rsplit(" ", 1)[1])
        entry = out.setdefault(generation, {"buckets": {}, "count": 0, "sum": 0.0})
        if line.startswith("scout_gc_pause_seconds_bucket"):
            entry["buckets"][bucket_bound(line)] = value
        elif line.startswith("scout_gc_pause_seconds_count"):
            entry["count"] = int(value)
        elif line.startswith("scout_gc_pause_seconds_sum"):
            entry["sum"] = value
    return out


def gc_pauses(after: dict[str, JSON], before: dict[str, JSON] | None = None) -> JSON:
    """Collections by generation between two scrapes (``before`` None: since the referee
    started): how many, their total seconds, and the upper bound of the longest one's bucket."""
    out: dict[str, JSON] = {}
    for generation, now in after.items():
        then = (before or {}).get(generation, {"buckets": {}, "count": 0, "sum": 0.0})
        longest, below = 0.0, 0.0
        by_bucket: dict[str, int] = {}
        for bound in sorted(now["buckets"]):
            within = now["buckets"][bound] - then["buckets"].get(bound, 0.0)
            if within > below:
                longest = bound
                by_bucket[f"{bound * 1000:g}"] = int(within - below)
            below = within
        out[generation] = {
            "count": now["count"] - then["count"],
            "total_s": now["sum"] - then["sum"],
            "max_le_s": longest,
            "by_bucket_le_ms": by_bucket,
        }
    return out


def gc_line(pauses: JSON | None) -> str:
    if not pauses:
        return "none"
    return " / ".join(
        (f"{pauses['count']}", f"{pauses['total_s']:.2f} s", f"<= {pauses['max_le_s'] * 1000:g} ms")
    )


def loop_lag_quantiles(text: str) -> JSON:
    """Upper bucket bounds of the p50, p99 and p99.9 of the referee's loop lag (its histogram),
    from a scraped metrics page."""
    buckets: list[tuple[float, float]] = []
    for line in text.splitlines():
        if line.startswith("scout_event_loop_lag_seconds_bucket"):
            buckets.append((bucket_bound(line), float(line.rsplit(" ", 1)[1])))
    total = buckets[-1][1] if buckets else 0.0
    if not total:
        return {"samples": 0}

    def quantile(q: float) -> float:
        return next(bound for bound, count in buckets if count >= q * total)

    return {
        "samples": int(total),
        "p50_le_ms": quantile(0.5) * 1000,
        "p99_le_ms": quantile(0.99) * 1000,
        "p999_le_ms": quantile(0.999) * 1000,
    }


# ----- report -----------------------------------------------------------------------------------


def _running(at_once: JSON | None) -> str:
    if not at_once:
        return "-"
    text = f"{at_once['mean']:.0f} / {at_once['min']} / {at_once['max']}"
    if at_once["short"]:
        text += f" (asked for {at_once['asked']}: creation could not keep up with matches ending)"
    return text


def _ms(summary: JSON, key: str) -> str:
    value = summary.get(key)
    return "-" if value is None or value != value else f"{value:.2f}"


def report(console: Console, data: JSON) -> None:
    setup = data["setup"]
    table = Table(
        title=f"Soak: {setup['bots']:,} bots (one TCP connection each, "
        f"{setup['bot_procs']} client processes), {setup['matches']} concurrent "
        f"{setup['players']}-player matches, {setup['seconds']:g} s, decision "
        f"{setup['decision_ms']} ms + bank {setup['time_bank_ms']} ms"
    )
    table.add_column("figure")
    table.add_column("value", justify="right")
    connect, rss, matches = data.get("connect", {}), data.get("rss", {}), data.get("matches", {})
    rows: list[tuple[str, str]] = []
    if connect:
        rows += [
            ("connect time, all bots", f"{connect['all_s']:.1f} s"),
            ("bots connected / failed", f"{connect['connected']:,} / {connect['failed']}"),
            ("referee sockets after connecting", f"{connect.get('referee_sockets', 0):,}"),
        ]
    if rss:
        fit = rss.get("fit_kb_per_finished_match")
        rows += [
            ("referee RSS idle (connected, no match)", f"{rss['idle_mb']:.0f} MB"),
            (
                "referee RSS peak (VmHWM / sampled)",
                f"{rss['peak_mb_vmhwm']:.0f} / {rss['peak_mb_sampled']:.0f} MB",
            ),
            (
                "RSS growth per finished match (fit)",
                "-" if fit is None else f"{fit:.1f} kB ({rss['fit_samples']} samples)",
            ),
        ]
        late = rss.get("after_first_1000")
        if late:
            rows.append(
                (
                    "RSS after 1,000 -> after last finished",
                    f"{late['rss_mb_at_1000']:.0f} -> {late['rss_mb_last']:.0f} MB "
                    f"({late['kb_per_match']:.1f} kB/match over "
                    f"{late['finished_last'] - late['finished_at_1000']:,})",
                )
            )
    if matches:
        decisions = data["decisions"]
        lat, own = data["latency_answer_round_trip"], data["latency_bot_own"]
        create = data["create_match"]
        batch = data["setup"].get("create_batch", 1)
        call = "CreateMatches" if batch > 1 else "CreateMatch"
        rows += [
            (
                "matches created / finished in window / total",
                f"{matches['created']:,} / {matches['finished_in_window']:,} / "
                f"{matches['finished_total']:,}",
            ),
            ("matches finished per second", f"{matches['finished_per_s']:.1f}"),
            (
                "matches running at once in the window: mean / min / max (sampled)",
                _running(matches.get("running_at_once")),
            ),
            ("decisions/s (accepted turn answers)", f"{decisions['per_s']:,.0f}"),
            (
                "answer -> next request p50 / p99 (lean)"
                if data.get("lean")
                else "answer round trip p50 / p99 (write -> AnswerResult)",
                f"{_ms(lat, 'p50_ms')} / {_ms(lat, 'p99_ms')} ms",
            ),
            (
                "bot's own time p50 / p99 (request read -> answer written)",
                f"{_ms(own, 'p50_ms')} / {_ms(own, 'p99_ms')} ms",
            ),
            (
                f"{call} p50 / p99, all",
                f"{_ms(create['latency'], 'p50_ms')} / {_ms(create['latency'], 'p99_ms')} ms",
            ),
            (
                f"{call} p50 / p99, replacing ended matches",
                f"{_ms(create['latency_replacing'], 'p50_ms')} / "
                f"{_ms(create['latency_replacing'], 'p99_ms')} ms",
            ),
            ("initial fill (all matches created at once)", f"{create['initial_fill_s']:.1f} s"),
            ("CreateMatch errors", json.dumps(create["errors"]) or "{}"),
            (
                f"{call} calls in flight at most",
                str(data["setup"].get("create_concurrency", MAX_CREATING)),
            ),
            (
                "matches per call: asked at most / mean",
                f"{batch} / {create.get('mean_batch') or 1:.1f}",
            ),
            (
                "referee loop lag p50 / p99 / p99.9 (histogram bound)",
                " / ".join(
                    f"<= {data.get('loop_lag', {}).get(k, 0):g} ms"
                    for k in ("p50_le_ms", "p99_le_ms", "p999_le_ms")
                ),
            ),
            *(
                (
                    f"referee collections of generation {gen} in window: count / total / "
                    "longest (bucket)",
                    gc_line(data.get("gc_pauses_in_window", {}).get(gen)),
                )
                for gen in ("0", "1", "2")
            ),
            (
                "referee full garbage collections, whole run: count / total / longest",
                gc_line(data.get("gc_pauses", {}).get("2")),
            ),
            ("referee CPU share in window", f"{data['cpu_share']['referee']:.0%}"),
            ("client processes CPU share", f"{data['cpu_share']['clients']:.0%}"),
        ]
    records = data.get("records", {})
    if records:
        rows += [
            (
                "records read: finished / all",
                f"{records.get('finished_records', 0):,} / "
                f"{sum(records.get('records_by_status', {}).values()):,}",
            ),
            (
                "seats that drew on the time bank (all records)",
                f"{records.get('seats_that_drew_on_the_bank', 0):,} of "
                f"{records.get('seats', 0):,} (total "
                f"{records['bank_drawn_ms']['total'] / 1000:.1f} s, max "
                f"{records['bank_drawn_ms']['max']} ms; by record status "
                f"{json.dumps(records.get('drew_on_the_bank_by_status', {}))})",
            ),
            (
                "time losses (timeouts) / forfeited seats",
                f"{records.get('timeouts', 0):,} / {records.get('forfeited_seats', 0):,}",
            ),
            ("record notes by kind", json.dumps(records.get("notes_by_kind", {}))),
        ]
    rows += [
        ("bot-side problems", json.dumps(data.get("bot_problems", {}))),
        (
            "streams ended / reconnects",
            f"{json.dumps(data.get('stream_ends', {}))} / {data.get('reconnects', 0)}",
        ),
        ("matches by status (ListMatches)", json.dumps(matches.get("by_status_listmatches", {}))),
        ("health at the end", str(data.get("health_at_end"))),
        ("referee log: error lines", str(data["referee_log_problems"]["lines"])),
        (
            "referee stop (SIGTERM) / exit code",
            f"{data.get('referee_stop_s', 0):.1f} s / {data.get('referee_exit')}",
        ),
    ]
    for row in rows:
        table.add_row(*row)
    console.print(table)
    for line in data["referee_log_problems"]["examples"]:
        console.print(f"[yellow]referee log: {line[:200]}[/]")
    console.print(f"[dim]total time {data['elapsed_s']:.1f} s[/]")
