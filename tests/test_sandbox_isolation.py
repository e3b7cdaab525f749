"""Real bots in real bubblewrap sandboxes (no referee: a Unix-socket echo server stands in; the
host is tests/support/sandbox_host.py). Limits are small so that the suite stays fast; they are
the same mechanisms as the defaults. A well-behaved bot reaches its socket and keeps its data; a
bot sees nothing of the host: its environment, TCP, the database, other bots, files outside its
data folder."""

from __future__ import annotations

import asyncio
import os
import socket

import pytest
from scout_arena.sandbox import (
    SandboxLimits,
)
from support.sandbox_host import (
    LIMITS,
    WELL_BEHAVED,
    Host,
    host_fixture,  # noqa: F401  (the *_fixture names: pytest fixtures)
)


def test_a_well_behaved_bot_reaches_its_socket_and_keeps_its_data(host: Host) -> None:
    first = asyncio.run(host.run(WELL_BEHAVED, name="good"))
    assert first.reason == "exited with status 0", first.output_tail
    assert first.exit_code == 0 and first.signal is None
    assert "echo hello from good" in first.output_tail
    assert "runs 1 hosted 1 /tmp" in first.output_tail
    assert host.received == [b"hello from good\n"]
    second = asyncio.run(host.run(WELL_BEHAVED, name="good"))
    assert "runs 2 hosted" in second.output_tail, second.output_tail
    assert (host.root / "bots" / "good" / "data" / "runs").read_text() == "2"


def test_a_python_bot_imports_the_nodes_sdk_rules_and_grpc(host: Host) -> None:
    source = """
        import grpc, scout_client, scout_rules
        from scout_client import GreedyBot
        channel = grpc.insecure_channel("unix:/run/scout/referee.sock")
        channel.close()
        print("imports ok", GreedyBot.__name__)
    """
    outcome = asyncio.run(
        host.run(
            source, limits=SandboxLimits(**{**LIMITS.__dict__, "memory_mb": 256, "cpu_seconds": 30})
        )
    )
    assert outcome.reason == "exited with status 0", outcome.output_tail
    assert "imports ok GreedyBot" in outcome.output_tail


def test_the_hosts_environment_does_not_reach_the_bot(
    host: Host, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SCOUT_ADMIN_TOKEN", "admin-secret-1234")
    source = """
        import os
        print(sorted(os.environ))
        print("secret" if "admin-secret-1234" in str(os.environ) else "clean")
    """
    outcome = asyncio.run(host.run(source))
    assert "clean" in outcome.output_tail and "SCOUT_ADMIN_TOKEN" not in outcome.output_tail


def test_a_bot_exiting_with_an_error_says_its_status(host: Host) -> None:
    outcome = asyncio.run(host.run("import sys\nprint('bye')\nsys.exit(3)\n"))
    assert (outcome.exit_code, outcome.reason) == (3, "exited with status 3")
    assert "bye" in outcome.output_tail


def test_a_bot_cannot_open_a_tcp_connection_to_the_host(host: Host) -> None:
    with socket.socket() as listener, socket.socket(socket.AF_UNIX) as abstract:
        listener.bind(("127.0.0.1", 0))
        listener.listen()
        listener.setblocking(False)
        abstract.bind(f"\0scout-sandbox-test-{os.getpid()}")
        abstract.listen()
        abstract.setblocking(False)
        port = listener.getsockname()[1]
        source = f"""
            import socket
            for address in [("127.0.0.1", {port}), ("1.1.1.1", 53), ("10.0.0.1", 5432)]:
                try:
                    socket.create_connection(address, timeout=2).close()
                    print("CONNECTED", address)
                except OSError as error:
                    print("blocked", address, error)
            try:
                with socket.socket(socket.AF_UNIX) as s:
                    s.connect("\\0scout-sandbox-test-{os.getpid()}")
                    print("CONNECTED abstract")
            except OSError as error:
                print("blocked abstract", error)
        """
        outcome = asyncio.run(host.run(source))
        assert "CONNECTED" not in outcome.output_tail, outcome.output_tail
        assert outcome.output_tail.count("blocked") == 4
        for server in (listener, abstract):
            with pytest.raises(BlockingIOError):
                server.accept()


def test_a_bot_sees_neither_the_database_nor_other_bots(host: Host) -> None:
    database = host.root / "ladder.db"
    database.write_text("owners and tokens")
    other = host.bot_folder("other", "SECRET = 'other bot strategy'\n")
    (host.root / "bots" / "other" / "data").mkdir()
    (host.root / "bots" / "other" / "data" / "model.bin").write_text("weights")
    paths = [
        str(database),
        str(other / "bot.py"),
        str(host.root / "bots" / "other" / "data"),
        str(host.root),
        "/root/.ssh",
        "/root/.bash_history",
        "/home",
        "/var",
        "/etc/passwd",
        "/etc/shadow",
        "/etc/hostname",
        "/tmp/pytest-of-root",
    ]
    source = f"""
        import os
        for path in {paths!r}:
            print("VISIBLE" if os.path.exists(path) else "hidden", path)
        print(sorted(os.listdir("/")))
        print(sorted(os.listdir("/etc")))
        print("pids", sorted(int(p) for p in os.listdir("/proc") if p.isdigit()))
    """
    outcome = asyncio.run(host.run(source))
    assert "VISIBLE" not in outcome.output_tail, outcome.output_tail
    assert outcome.output_tail.count("hidden") == len(paths)
    assert "pids [1, 2]" in outcome.output_tail


def test_a_bot_cannot_write_outside_its_data_folder(host: Host) -> None:
    targets = [
        "/bot/evil.py",
        "/bot/scout-bot.toml",
        "/usr/evil",
        "/etc/evil",
        "/evil",
        "/run/scout/evil",
        "/proc/evil",
        "/dev/evil",
        "/work/evil",
    ]
    source = f"""
        import os
        for path in {targets!r}:
            try:
                with open(path, "w") as file:
                    file.write("pwned")
                print("WROTE", path)
            except OSError as error:
                print("refused", path, error.strerror)
        try:
            os.chmod("/bot/bot.py", 0o777)
            print("WROTE chmod")
        except OSError:
            print("refused chmod")
    """
    code = host.bot_folder("bot", source)
    before = {path.name: path.read_bytes() for path in code.iterdir()}
    outcome = asyncio.run(host.run(source))
    assert "WROTE" not in outcome.output_tail, outcome.output_tail
    assert outcome.output_tail.count("refused") == len(targets) + 1
    assert {path.name: path.read_bytes() for path in code.iterdir() if path.is_file()} == before
