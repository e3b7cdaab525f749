"""Real bots in real bubblewrap sandboxes (no referee: a Unix-socket echo server stands in; the
host is tests/support/sandbox_host.py). Limits are small so that the suite stays fast; they are
the same mechanisms as the defaults. Every limit contains a hostile bot and the reason it ended
is reported in words: processes, memory, disk, file size, CPU time, output, and stopping."""

from __future__ import annotations

import asyncio
import os
import subprocess

from scout_arena.sandbox import (
    RunOutcome,
    SandboxLimits,
)
from support.sandbox_host import (
    LIMITS,
    Host,
    host_fixture,  # noqa: F401  (the *_fixture names: pytest fixtures)
    no_process_runs,
)


def test_a_fork_bomb_is_bounded_and_killed(host: Host) -> None:
    marker = f"forkbomb-{os.getpid()}"
    source = f"""
        import os, time
        MARKER = "{marker}"
        while True:
            try:
                os.fork()
            except OSError:
                time.sleep(0.01)
    """
    outcome = asyncio.run(
        host.run(
            source,
            manifest=('runtime = "python"\ncommand = ["python", "bot.py", "' + marker + '"]\n'),
        )
    )
    assert outcome.reason == "killed: reached the limit of 16 processes and threads"
    assert subprocess.run(["true"], check=False).returncode == 0
    assert no_process_runs(marker)


def test_a_bot_allocating_without_end_is_killed_by_the_memory_limit(host: Host) -> None:
    source = """
        import time
        hoard = []
        while True:
            hoard.append(b"x" * (1024 * 1024))
            time.sleep(0.02)  # 50 MB/s: the watchdog, not RLIMIT_DATA, stops it
    """
    outcome = asyncio.run(host.run(source))
    assert outcome.reason == "killed: memory limit of 64 MB", outcome.output_tail
    assert outcome.peak_memory_bytes > 64 * 1024 * 1024


def test_forked_workers_sharing_their_parents_memory_count_it_once(host: Host) -> None:
    source = """
        import os, time
        ballast = b"x" * (40 * 1024 * 1024)
        workers = []
        for _ in range(4):
            pid = os.fork()
            if pid == 0:
                time.sleep(1.5)
                os._exit(0)
            workers.append(pid)
        for pid in workers:
            os.waitpid(pid, 0)
        print("workers done", len(ballast))
    """
    outcome = asyncio.run(host.run(source))
    assert outcome.reason == "exited with status 0", outcome.output_tail
    assert "workers done" in outcome.output_tail


def test_forked_workers_allocating_without_end_are_killed_by_the_memory_limit(host: Host) -> None:
    source = """
        import os, time
        for _ in range(2):
            if os.fork() == 0:
                break
        hoard = []
        while True:
            hoard.append(b"x" * (1024 * 1024))
            time.sleep(0.01)
    """
    outcome = asyncio.run(host.run(source))
    assert outcome.reason == "killed: memory limit of 64 MB", outcome.output_tail


def test_a_bot_mapping_shared_memory_without_end_is_killed_by_the_memory_limit(host: Host) -> None:
    # Shared anonymous mappings escape RLIMIT_DATA; the watchdog counts them (RssShmem).
    source = """
        import mmap, time
        hoard = []
        while True:
            block = mmap.mmap(-1, 1024 * 1024, flags=mmap.MAP_SHARED | mmap.MAP_ANONYMOUS)
            block.write(b"x" * (1024 * 1024))
            hoard.append(block)
            time.sleep(0.01)
    """
    outcome = asyncio.run(host.run(source))
    assert outcome.reason == "killed: memory limit of 64 MB", outcome.output_tail


def test_memory_no_process_holds_and_new_namespaces_are_refused(host: Host) -> None:
    source = """
        import ctypes, os, subprocess, threading
        libc = ctypes.CDLL(None, use_errno=True)
        def call(name, *args):
            result = getattr(libc, name)(*args)
            print(name, args[:1], "ALLOWED" if result >= 0 else os.strerror(ctypes.get_errno()))
        call("shmget", 0, 512 * 1024 * 1024, 0o1000 | 0o600)
        call("msgget", 0, 0o1000 | 0o600)
        call("unshare", 0x10000000)
        call("unshare", 0x40000000)
        call("syscall", 319, b"x", 0)
        call("syscall", 425, 8, None)
        try:
            os.memfd_create("hoard")
            print("memfd ALLOWED")
        except OSError as error:
            print("memfd", error.strerror)
        worker = threading.Thread(target=lambda: print("threads work"))
        worker.start()
        worker.join()
        print(subprocess.run(["/bin/echo", "children work"], capture_output=True,
                             text=True).stdout.strip())
    """
    outcome = asyncio.run(host.run(source))
    assert outcome.reason == "exited with status 0", outcome.output_tail
    assert "ALLOWED" not in outcome.output_tail, outcome.output_tail
    assert outcome.output_tail.count("Operation not permitted") == 7
    assert "threads work" in outcome.output_tail and "children work" in outcome.output_tail


def test_a_bot_filling_its_data_folder_is_killed_at_the_cap(host: Host) -> None:
    source = """
        import itertools, time
        for index in itertools.count():
            with open(f"/bot/data/fill{index}", "wb") as file:
                file.write(b"x" * 256 * 1024)
            time.sleep(0.01)
    """
    outcome = asyncio.run(host.run(source))
    assert outcome.reason == "killed: data/ over 4 MB", outcome.output_tail


def test_a_bot_filling_tmp_is_killed_at_the_cap(host: Host) -> None:
    source = """
        import itertools, time
        try:
            for index in itertools.count():
                with open(f"/tmp/fill{index}", "wb") as file:
                    file.write(b"x" * 256 * 1024)
        except OSError as error:
            print("full:", error)
        time.sleep(3600)
    """
    outcome = asyncio.run(host.run(source))
    assert outcome.reason == "killed: /tmp over 4 MB", outcome.output_tail


def test_one_file_cannot_outgrow_the_file_size_limit(host: Host) -> None:
    source = """
        try:
            with open("/bot/data/big", "wb") as file:
                file.write(b"x" * 2 * 1024 * 1024)
            print("WROTE")
        except OSError as error:
            print("refused:", error.strerror)
    """
    limits = SandboxLimits(**{**LIMITS.__dict__, "file_size_mb": 1})
    outcome = asyncio.run(host.run(source, limits=limits))
    assert "refused: File too large" in outcome.output_tail, outcome.output_tail
    assert (host.root / "bots" / "bot" / "data" / "big").stat().st_size <= 1024 * 1024


def test_a_bot_spinning_past_its_cpu_time_is_killed(host: Host) -> None:
    outcome = asyncio.run(host.run("while True:\n    pass\n"))
    assert outcome.reason == "killed: CPU time limit of 1 s", outcome.output_tail
    assert outcome.cpu_seconds >= 0.2


def test_a_bot_flooding_its_output_is_killed_and_only_its_tail_kept(host: Host) -> None:
    source = """
        import sys
        while True:
            sys.stdout.write("o" * 4096)
            sys.stderr.write("e" * 4096)
    """
    outcome = asyncio.run(host.run(source))
    assert outcome.reason == "killed: more than 64 KiB of output"
    assert 0 < len(outcome.output_tail) <= 64 * 1024


def test_a_sleeping_bot_is_stopped_and_stop_is_idempotent(host: Host) -> None:
    async def scenario() -> tuple[RunOutcome, RunOutcome, RunOutcome]:
        server = await host.serve("sleepy")
        try:
            process = await host.start(
                "import time\nprint('zz', flush=True)\ntime.sleep(3600)\n", name="sleepy"
            )
            await asyncio.sleep(0.5)
            first = await process.stop()
            return first, await process.stop(), await process.wait()
        finally:
            server.close()

    first, second, waited = asyncio.run(scenario())
    assert first.reason == "stopped after its match"
    assert first == second == waited


def test_a_bot_ignoring_sigterm_is_killed_after_the_grace(host: Host) -> None:
    marker = f"stubborn-{os.getpid()}"

    async def scenario() -> RunOutcome:
        server = await host.serve("stubborn")
        try:
            process = await host.start(
                "import signal, time\nsignal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
                "print('ready', flush=True)\ntime.sleep(3600)\n",
                name="stubborn",
                manifest=f'runtime = "python"\ncommand = ["python", "bot.py", "{marker}"]\n',
            )
            while "ready" not in process.output_tail():
                await asyncio.sleep(0.05)
            return await process.stop(grace_s=0.3)
        finally:
            server.close()

    outcome = asyncio.run(scenario())
    assert outcome.reason == "stopped after its match"
    assert no_process_runs(marker)
