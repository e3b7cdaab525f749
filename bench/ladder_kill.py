"""Ladder crash loop: kill -9 the ladder while it plays, restart it, and check that nothing is lost.

Run as ``.venv/bin/python bench/ladder_kill.py --json bench/results/ladder_kill.json`` (SQLite in
a temporary folder by default; ``--postgres`` for a fresh schema in the throwaway PostgreSQL of
``bash .ci/postgres.sh --url``, dropped afterwards; ``--database URL`` for any other database,
used as it is).

Setup: ``--bots`` bots are registered with ``scout-arena ladder register`` (one owner each), the
ladder is started with ``scout-arena ladder serve`` on a fixed port, and each bot runs as its own
``scout-arena bot run random`` process (SCOUT_ADDRESS / SCOUT_TOKEN), which reconnects by itself
when the ladder goes away. Then, ``--cycles`` times:

1. let matches finish for ``--run-seconds``;
2. count the matches in the database by status (SQL on the ``matches`` table), keeping the ids;
3. ``kill -9`` the ladder and count again: every match that was finished before the kill must
   still be finished (none lost), and the ones in flight are left in flight;
4. restart the ladder (timed until it listens; it voids the matches that were in flight and says
   how many), count again: nothing finished lost, every match in flight at the kill now void;
5. ``scout-arena ladder recompute`` must report no difference between the stored ratings and a
   replay of the history; ``scout-arena ladder matches`` must list as many finished matches as
   the database holds.

Also reported: matches finished per cycle (the ladder must keep playing after every restart),
matches that stayed in flight for longer than ``--stuck-seconds`` while the ladder was up (a
result that was never stored), bot processes that had to be restarted, and error lines in the
ladder's logs.
"""

from __future__ import annotations

import argparse
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator, Sequence
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import IO, Any

import grpc
from common import free_port, write_json
from rich.console import Console
from rich.table import Table
from scout.v1 import matches_pb2, matches_pb2_grpc

JSON = dict[str, Any]
ROOT = Path(__file__).resolve().parent.parent
SCOUT_ARENA = [sys.executable, "-m", "scout_arena.cli"]
MATCH_ID = re.compile(r"\bm-[0-9a-f]{6,}\b")
ADMIN_TOKEN = "ladder-kill-admin"


# ----- the database, read directly --------------------------------------------------------------


@dataclass(frozen=True)
class Counts:
    finished: frozenset[str]
    in_flight: frozenset[str]
    void: frozenset[str]
    stuck: frozenset[str]  # in flight for longer than the stuck limit

    def summary(self) -> JSON:
        return {"finished": len(self.finished), "in_flight": len(self.in_flight),
                "void": len(self.void), "stuck_in_flight": len(self.stuck)}


class Database:
    def __init__(self, url: str) -> None:
        from sqlalchemy import create_engine

        self.engine = create_engine(url)

    def counts(self, stuck_s: float) -> Counts:
        from sqlalchemy import text

        with self.engine.connect() as connection:
            try:
                rows = list(connection.execute(text(
                    "SELECT id, status, created_at FROM matches")))
            except Exception as exc:  # the ladder has not created its tables yet
                if "matches" in str(exc):
                    return Counts(frozenset(), frozenset(), frozenset(), frozenset())
                raise
        now = datetime.now(UTC)
        by: dict[str, set[str]] = {"finished": set(), "in_flight": set(), "void": set()}
        stuck = set()
        for match_id, status, created in rows:
            by.setdefault(str(status), set()).add(str(match_id))
            if status == "in_flight" and _age_s(created, now) > stuck_s:
                stuck.add(str(match_id))
        return Counts(frozenset(by["finished"]), frozenset(by["in_flight"]),
                      frozenset(by["void"]), frozenset(stuck))

    def close(self) -> None:
        self.engine.dispose()


def _age_s(created: Any, now: datetime) -> float:
    if isinstance(created, str):
        created = datetime.fromisoformat(created)
    if not isinstance(created, datetime):
        return 0.0
    if created.tzinfo is None:
        created = created.replace(tzinfo=UTC)
    age: float = (now - created).total_seconds()
    return age


@contextmanager
def postgres_schema() -> Iterator[str]:
    """A fresh schema in the throwaway PostgreSQL of .ci/postgres.sh, dropped afterwards."""
    from sqlalchemy import create_engine, text

    url = subprocess.run(["bash", str(ROOT / ".ci" / "postgres.sh"), "--url"], check=True,
                         capture_output=True, text=True).stdout.strip().splitlines()[-1]
    admin = create_engine(url, isolation_level="AUTOCOMMIT")
    schema = f"ladder_kill_{uuid.uuid4().hex[:12]}"
    with admin.connect() as connection:
        connection.execute(text(f'CREATE SCHEMA "{schema}"'))
    try:
        yield admin.url.update_query_dict({"options": f"-csearch_path={schema}"}).render_as_string(
            hide_password=False)
    finally:
        with admin.connect() as connection:
            connection.execute(text(f'DROP SCHEMA "{schema}" CASCADE'))
        admin.dispose()


# ----- processes --------------------------------------------------------------------------------


def cli(*args: str, database: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*SCOUT_ARENA, "ladder", *args, "--database", database],
                          capture_output=True, text=True, timeout=timeout)


@dataclass
class Ladder:
    """``scout-arena ladder serve`` restarted on the same port as often as needed."""

    database: str
    port: int
    work: Path
    args: Sequence[str]
    process: subprocess.Popen[str] | None = None
    runs: int = 0
    log: IO[str] | None = None

    def start(self, timeout: float = 120) -> tuple[float, list[str]]:
        """Start it; return the time until it listens and the matches it voided at start."""
        self.runs += 1
        log_path = self.work / f"ladder-{self.runs}.log"
        self.log = log_path.open("w")
        started = time.monotonic()
        self.process = subprocess.Popen(
            [*SCOUT_ARENA, "ladder", "serve", "--database", self.database, "--port",
             str(self.port), *self.args], stdout=subprocess.PIPE, stderr=self.log, text=True)
        stdout = self.process.stdout
        assert stdout is not None
        voided: list[str] = []
        deadline = started + timeout
        while time.monotonic() < deadline:
            line = stdout.readline()
            if not line:
                raise RuntimeError(f"the ladder exited ({self.process.wait()}) before "
                                   f"listening:\n{log_path.read_text()[-3000:]}")
            if line.startswith("voided "):
                voided = MATCH_ID.findall(line)
            if "ladder listening on" in line:
                return time.monotonic() - started, voided
        raise RuntimeError("the ladder did not start listening in time")

    def wait_connected(self, names: Sequence[str], timeout: float) -> float | None:
        """Seconds until every named bot connected to this run of the ladder (its -v log says
        so), or None if they did not within ``timeout``."""
        started = time.monotonic()
        path = self.work / f"ladder-{self.runs}.log"
        while time.monotonic() - started < timeout:
            text = path.read_text(errors="replace")
            if all(f"bot {name} connected" in text for name in names):
                return time.monotonic() - started
            time.sleep(0.1)
        return None

    def kill(self) -> None:
        if self.process is not None and self.process.poll() is None:
            os.kill(self.process.pid, signal.SIGKILL)
            self.process.wait()
        if self.log is not None:
            self.log.close()

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(30)
            except subprocess.TimeoutExpired:
                self.kill()
        if self.log is not None:
            self.log.close()


class Bots:
    def __init__(self, address: str, tokens: dict[str, str], work: Path) -> None:
        self.address = address
        self.tokens = tokens
        self.work = work
        self.processes: dict[str, subprocess.Popen[str]] = {}
        self.restarts = 0

    def start(self, name: str) -> None:
        env = {**os.environ, "SCOUT_ADDRESS": self.address, "SCOUT_TOKEN": self.tokens[name]}
        log = (self.work / f"bot-{name}.log").open("a")
        self.processes[name] = subprocess.Popen(
            [*SCOUT_ARENA, "bot", "run", "random", "--seed", str(len(self.processes))],
            env=env, stdout=subprocess.DEVNULL, stderr=log, text=True)
        log.close()

    def start_all(self) -> None:
        for name in self.tokens:
            self.start(name)

    def revive(self) -> list[str]:
        """Restart bot processes that exited (they should not: they reconnect by themselves)."""
        dead = [name for name, p in self.processes.items() if p.poll() is not None]
        for name in dead:
            self.restarts += 1
            self.start(name)
        return dead

    def stop(self) -> None:
        for process in self.processes.values():
            if process.poll() is None:
                process.terminate()
        for process in self.processes.values():
            try:
                process.wait(15)
            except subprocess.TimeoutExpired:
                process.kill()


def referee_finished(address: str) -> set[str]:
    """The matches the ladder's referee has seen finish (its Matches service, admin token)."""
    with grpc.insecure_channel(address) as channel:
        stub = matches_pb2_grpc.MatchesStub(channel)
        response = stub.ListMatches(
            matches_pb2.ListMatchesRequest(status=matches_pb2.MATCH_STATUS_FINISHED,
                                           limit=100_000_000),
            metadata=(("authorization", f"Bearer {ADMIN_TOKEN}"),), timeout=30)
    return {m.match_id for m in response.matches}


def listed_finished(database: str) -> int | None:
    """Finished matches as ``scout-arena ladder matches`` prints them (a rich table)."""
    done = cli("matches", "--limit", "100000000", database=database)
    if done.returncode != 0:
        return None
    count = 0
    for line in done.stdout.splitlines():
        cells = [c.strip() for c in re.split(r"[│|┃]", line)]
        if len(cells) > 2 and MATCH_ID.fullmatch(cells[1] or "") and \
                cells[2].startswith("finished"):
            count += 1
    return count


def log_errors(work: Path) -> JSON:
    bad: list[str] = []
    for path in sorted(work.glob("ladder-*.log")):
        for line in path.read_text(errors="replace").splitlines():
            if any(w in line for w in ("Traceback", "ERROR", "Error", "exception")):
                bad.append(f"{path.name}: {line}")
    return {"lines": len(bad), "examples": bad[:10]}


# ----- the loop ---------------------------------------------------------------------------------


def run(args: argparse.Namespace, database: str, work: Path, console: Console) -> JSON:
    started = time.monotonic()
    tokens: dict[str, str] = {}
    for i in range(args.bots):
        name = f"k{i}"
        done = cli("register", name, "--owner", f"owner-{i}", database=database)
        if done.returncode != 0:
            raise RuntimeError(f"register {name} failed: {done.stderr}")
        tokens[name] = done.stdout.strip().splitlines()[-1]
    port = free_port()
    ladder = Ladder(database, port, work, [
        "--table-sizes", args.table_sizes, "--decision-ms", str(args.decision_ms),
        "--seed", "1", "--admin-token", ADMIN_TOKEN, "-v"])
    bots = Bots(f"127.0.0.1:{port}", tokens, work)
    db = Database(database)
    cycles: list[JSON] = []
    problems: list[str] = []
    try:
        first_start, _ = ladder.start()
        bots.start_all()
        if ladder.wait_connected(list(tokens), 120) is None:
            raise RuntimeError("the bots did not connect within 120 s")
        deadline = time.monotonic() + 120
        while not db.counts(args.stuck_seconds).finished:
            if time.monotonic() > deadline:
                raise RuntimeError("no match finished within 120 s of starting the bots")
            time.sleep(0.2)
        console.print(f"[dim]ladder up in {first_start:.1f} s, {args.bots} bots started, "
                      "first match finished[/]")
        previous = db.counts(args.stuck_seconds)
        for cycle in range(1, args.cycles + 1):
            time.sleep(args.run_seconds)
            # Every match the referee saw finish must reach the database (its result is written
            # off the event loop right after): allow a few seconds, then count what is missing.
            seen = referee_finished(bots.address)
            deadline = time.monotonic() + 5
            while True:
                before = db.counts(args.stuck_seconds)
                unrecorded = sorted(seen - before.finished)
                if not unrecorded or time.monotonic() > deadline:
                    break
                time.sleep(0.2)
            ladder.kill()
            after_kill = db.counts(args.stuck_seconds)
            # While the ladder is down the database stands still: the CLI sees what it left.
            recompute = cli("recompute", database=database)
            listed = listed_finished(database)
            restart_s, voided = ladder.start()
            after_restart = db.counts(args.stuck_seconds)
            revived = bots.revive()
            # The bots come back on their own, after their reconnect backoff (up to 5 s).
            back_s = ladder.wait_connected(list(tokens), 60)
            if back_s is None:
                problems.append(f"cycle {cycle}: not every bot reconnected within 60 s")
            lost_at_kill = sorted(before.finished - after_kill.finished)
            lost_at_restart = sorted(after_kill.finished - after_restart.finished)
            not_voided = sorted(after_kill.in_flight - after_restart.void)
            recompute_ok = recompute.returncode == 0 and \
                "stored ratings match the recomputation exactly" in recompute.stdout
            row: JSON = {
                "cycle": cycle,
                "finished_this_cycle": len(before.finished - previous.finished),
                "run_s": args.run_seconds,
                "before_kill": before.summary(), "after_kill": after_kill.summary(),
                "after_restart": after_restart.summary(),
                "finished_between_count_and_kill": len(after_kill.finished - before.finished),
                "finished_by_referee": len(seen), "finished_not_recorded": unrecorded,
                "lost_at_kill": lost_at_kill, "lost_at_restart": lost_at_restart,
                "in_flight_at_kill": len(after_kill.in_flight),
                "voided_at_restart": len(voided), "in_flight_not_voided": not_voided,
                "stuck_before_kill": sorted(before.stuck),
                "restart_s": restart_s, "bots_back_s": back_s, "recompute_ok": recompute_ok,
                "recompute_output": recompute.stdout.strip().splitlines()[-3:]
                + recompute.stderr.strip().splitlines()[-3:],
                "listed_finished": listed, "bots_revived": revived,
            }
            cycles.append(row)
            for what, bad in (("matches the referee finished that the database does not "
                               "hold as finished (their results are lost)", unrecorded),
                              ("finished matches lost at the kill", lost_at_kill),
                              ("finished matches lost at the restart", lost_at_restart),
                              ("in-flight matches not voided", not_voided),
                              ("matches stuck in flight", sorted(before.stuck))):
                if bad:
                    problems.append(f"cycle {cycle}: {what}: {bad[:5]}")
            if not recompute_ok:
                problems.append(f"cycle {cycle}: recompute: {row['recompute_output']}")
            if listed != len(after_kill.finished):
                problems.append(f"cycle {cycle}: `ladder matches` lists {listed} finished, "
                                f"the database holds {len(after_kill.finished)}")
            if row["finished_this_cycle"] == 0:
                problems.append(f"cycle {cycle}: no match finished in {args.run_seconds} s")
            if set(voided) != set(after_kill.in_flight):
                problems.append(f"cycle {cycle}: the ladder voided {len(voided)} at start, "
                                f"{len(after_kill.in_flight)} were in flight")
            console.print(f"[dim]cycle {cycle}: {row['finished_this_cycle']} finished, "
                          f"{len(after_kill.in_flight)} in flight at the kill, "
                          f"{len(voided)} voided, restart {restart_s:.1f} s, recompute "
                          f"{'ok' if recompute_ok else 'DIFFERS'}[/]")
            previous = after_restart
    finally:
        bots.stop()
        ladder.stop()
    final = db.counts(args.stuck_seconds)
    db.close()
    recompute = cli("recompute", database=database)
    final_recompute_ok = recompute.returncode == 0 and \
        "stored ratings match the recomputation exactly" in recompute.stdout
    if not final_recompute_ok:
        problems.append(f"after the last stop: recompute: {recompute.stdout[-500:]}")
    errors = log_errors(work)
    if errors["lines"]:
        problems.append(f"{errors['lines']} error lines in the ladder logs")
    return {"benchmark": "scout-arena ladder kill -9 loop",
            "setup": {"bots": args.bots, "cycles": args.cycles,
                      "run_seconds": args.run_seconds, "table_sizes": args.table_sizes,
                      "decision_ms": args.decision_ms,
                      "database": "postgresql" if database.startswith("postgresql")
                      else database.split(":", 1)[0]},
            "cycles": cycles, "final": final.summary(),
            "totals": {"finished": len(final.finished),
                       "lost": sum(len(c["lost_at_kill"]) + len(c["lost_at_restart"])
                                   + len(c["finished_not_recorded"]) for c in cycles),
                       "voided": len(final.void), "bot_restarts": bots.restarts,
                       "recompute_all_ok": all(c["recompute_ok"] for c in cycles)
                       and final_recompute_ok},
            "problems": problems, "ladder_log_errors": errors,
            "elapsed_s": time.monotonic() - started}


def report(console: Console, data: JSON) -> None:
    setup = data["setup"]
    table = Table(title=f"Ladder kill -9 loop: {setup['bots']} bots, tables "
                        f"{setup['table_sizes']}, {setup['run_seconds']:g} s per cycle, "
                        f"{setup['database']}")
    for col in ("cycle", "finished", "db: before kill", "after kill", "after restart",
                "lost", "in flight → voided", "restart s", "bots back s", "recompute",
                "`ladder matches`"):
        table.add_column(col, justify="right")
    for c in data["cycles"]:
        table.add_row(
            str(c["cycle"]), str(c["finished_this_cycle"]),
            str(c["before_kill"]["finished"]), str(c["after_kill"]["finished"]),
            str(c["after_restart"]["finished"]),
            str(len(c["lost_at_kill"]) + len(c["lost_at_restart"])
                + len(c["finished_not_recorded"])),
            f"{c['in_flight_at_kill']} → {c['voided_at_restart']}", f"{c['restart_s']:.1f}",
            "-" if c["bots_back_s"] is None else f"{c['bots_back_s']:.1f}",
            "no difference" if c["recompute_ok"] else "[red]DIFFERS[/]",
            str(c["listed_finished"]))
    totals = data["totals"]
    table.add_row("total", str(totals["finished"]), "", "", "", str(totals["lost"]),
                  f"{totals['voided']} void", "", "", "ok" if totals["recompute_all_ok"] else "NO",
                  "", style="bold")
    console.print(table)
    console.print("[dim]finished: matches finished during the cycle (from the bots being back "
                  "to the next kill); db columns: finished "
                  "matches in the database just before the kill, right after it and after the "
                  "restart; lost: finished by the referee but not stored as finished before "
                  "the kill, or finished before the kill and not after; recompute and `ladder "
                  "matches` (finished rows it lists) run while the ladder is down[/]")
    for problem in data["problems"]:
        console.print(f"[yellow]{problem}[/]")
    errors = data["ladder_log_errors"]
    if errors["lines"]:
        console.print(f"[yellow]{errors['lines']} error lines in the ladder logs, e.g.:[/]")
        for line in errors["examples"]:
            console.print(f"[yellow]  {line[:220]}[/]")
    verdict = "PASS" if not data["problems"] and totals["lost"] == 0 else "PROBLEMS"
    console.print(f"{verdict}: {totals['finished']} finished matches, {totals['lost']} lost, "
                  f"{data['elapsed_s']:.0f} s")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bots", type=int, default=4)
    parser.add_argument("--cycles", type=int, default=5)
    parser.add_argument("--run-seconds", type=float, default=5.0,
                        help="let matches finish this long before each kill")
    parser.add_argument("--table-sizes", default="2,3")
    parser.add_argument("--decision-ms", type=int, default=1000)
    parser.add_argument("--stuck-seconds", type=float, default=30.0,
                        help="a match in flight longer than this is reported as stuck")
    db = parser.add_mutually_exclusive_group()
    db.add_argument("--database", help="SQLAlchemy URL, used as it is")
    db.add_argument("--postgres", action="store_true",
                    help="a fresh schema in the PostgreSQL of .ci/postgres.sh")
    parser.add_argument("--json", metavar="PATH")
    parser.add_argument("--keep", metavar="DIR", help="keep the logs (and SQLite file) here")
    args = parser.parse_args(argv)
    console = Console() if sys.stdout.isatty() else Console(width=150)
    with ExitStack() as stack:
        if args.keep:
            work = Path(args.keep)
            work.mkdir(parents=True, exist_ok=True)
        else:
            work = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="ladder-kill-")))
        if args.postgres:
            database = stack.enter_context(postgres_schema())
        else:
            database = args.database or f"sqlite:///{work / 'ladder.db'}"
        data = run(args, database, work, console)
    report(console, data)
    if args.json:
        write_json(args.json, data, console)
    return 0 if not data["problems"] else 1


if __name__ == "__main__":
    sys.exit(main())
