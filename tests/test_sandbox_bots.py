"""Real bots in real bubblewrap sandboxes (no referee: a Unix-socket echo server stands in).

A well-behaved bot reaches its socket and keeps its data; every hostile bot is contained, the
reason it ended is reported in words, and the host goes on unaffected. Limits are small so that
the suite stays fast; they are the same mechanisms as the defaults.
"""

from __future__ import annotations

import asyncio
import os
import socket
import subprocess
import sys
import tempfile
import textwrap
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from scout_arena.sandbox import (
    HostedProcess,
    RunOutcome,
    Sandbox,
    SandboxLimits,
    parse_manifest,
    probe,
)
from scout_arena.sandbox.identity import UID_BASE, UID_COUNT, lease_uid

LIMITS = SandboxLimits(memory_mb=64, cpu_seconds=1, processes=16, open_files=64, file_size_mb=4,
                       output_bytes=64 * 1024, data_mb=4, tmp_mb=4, data_files=500)
#: A safety net against a hung test, never an assertion about speed.
PATIENCE_S = 120.0


@dataclass
class Host:
    """A host folder as a ladder keeps it: bots' code and data, a database file, a socket."""

    root: Path
    socket_dir: Path
    received: list[bytes] = field(default_factory=list)

    def bot_folder(self, name: str, source: str, manifest: str | None = None) -> Path:
        code = self.root / "bots" / name / "code"
        code.mkdir(parents=True, exist_ok=True)
        (code / "bot.py").write_text(textwrap.dedent(source))
        (code / "scout-bot.toml").write_text(
            manifest or 'runtime = "python"\ncommand = ["python", "bot.py"]\n')
        return code

    async def start(self, source: str, *, name: str = "bot", limits: SandboxLimits = LIMITS,
                    manifest: str | None = None) -> HostedProcess:
        code = self.bot_folder(name, source, manifest)
        sandbox = Sandbox(limits)
        return await sandbox.start(
            name=name, code_dir=code, data_dir=self.root / "bots" / name / "data",
            socket_path=self.socket_dir / f"{name}.sock",
            manifest=parse_manifest((code / "scout-bot.toml").read_text()))

    async def run(self, source: str, *, name: str = "bot", limits: SandboxLimits = LIMITS,
                  manifest: str | None = None) -> RunOutcome:
        server = await self.serve(name)
        try:
            process = await self.start(source, name=name, limits=limits, manifest=manifest)
            try:
                return await asyncio.wait_for(process.wait(), PATIENCE_S)
            except TimeoutError:
                await process.stop(0.1)
                raise
        finally:
            server.close()

    async def serve(self, name: str) -> asyncio.Server:
        async def echo(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            line = await reader.readline()
            self.received.append(line)
            writer.write(b"echo " + line)
            await writer.drain()
            writer.close()

        path = self.socket_dir / f"{name}.sock"
        path.unlink(missing_ok=True)
        return await asyncio.start_unix_server(echo, str(path))


@pytest.fixture
def host(tmp_path: Path) -> Iterator[Host]:
    support = probe()
    assert support.available, support.reason
    # Unix socket paths are limited to 108 bytes: keep them short.
    with tempfile.TemporaryDirectory(prefix="scout-sbx-", dir="/tmp") as socket_dir:
        yield Host(tmp_path, Path(socket_dir))


def no_process_runs(marker: str) -> bool:
    """No process on the host has ``marker`` in its command line."""
    for entry in os.scandir("/proc"):
        if entry.name.isdigit():
            try:
                with open(f"/proc/{entry.name}/cmdline", "rb") as file:
                    if marker.encode() in file.read():
                        return False
            except OSError:
                continue
    return True


WELL_BEHAVED = """
    import os, socket
    assert os.getcwd() == "/bot"
    path = os.environ["SCOUT_ADDRESS"].removeprefix("unix:")
    with socket.socket(socket.AF_UNIX) as s:
        s.connect(path)
        s.sendall(f"hello from {os.environ['SCOUT_BOT_NAME']}\\n".encode())
        print(s.recv(100).decode().strip())
    counter = os.path.join(os.environ["SCOUT_DATA_DIR"], "runs")
    runs = int(open(counter).read()) + 1 if os.path.exists(counter) else 1
    open(counter, "w").write(str(runs))
    open("/tmp/scratch", "w").write("private")
    print("runs", runs, os.environ["SCOUT_TOKEN"], os.environ["SCOUT_CONCURRENCY"],
          os.environ["HOME"])
"""


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
    outcome = asyncio.run(host.run(source, limits=SandboxLimits(
        **{**LIMITS.__dict__, "memory_mb": 256, "cpu_seconds": 30})))
    assert outcome.reason == "exited with status 0", outcome.output_tail
    assert "imports ok GreedyBot" in outcome.output_tail


def test_the_hosts_environment_does_not_reach_the_bot(host: Host,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
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
    paths = [str(database), str(other / "bot.py"), str(host.root / "bots" / "other" / "data"),
             str(host.root), "/root/.ssh", "/root/.bash_history", "/home", "/var",
             "/etc/passwd", "/etc/shadow", "/etc/hostname", "/tmp/pytest-of-root"]
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
    targets = ["/bot/evil.py", "/bot/scout-bot.toml", "/usr/evil", "/etc/evil", "/evil",
               "/run/scout/evil", "/proc/evil", "/dev/evil", "/work/evil"]
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
    outcome = asyncio.run(host.run(source, manifest=(
        'runtime = "python"\ncommand = ["python", "bot.py", "' + marker + '"]\n')))
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


def test_forked_workers_allocating_without_end_are_killed_by_the_memory_limit(
        host: Host) -> None:
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


def test_a_bot_mapping_shared_memory_without_end_is_killed_by_the_memory_limit(
        host: Host) -> None:
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
            process = await host.start("import time\nprint('zz', flush=True)\ntime.sleep(3600)\n",
                                       name="sleepy")
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
                "print('ready', flush=True)\ntime.sleep(3600)\n", name="stubborn",
                manifest=f'runtime = "python"\ncommand = ["python", "bot.py", "{marker}"]\n')
            while "ready" not in process.output_tail():
                await asyncio.sleep(0.05)
            return await process.stop(grace_s=0.3)
        finally:
            server.close()

    outcome = asyncio.run(scenario())
    assert outcome.reason == "stopped after its match"
    assert no_process_runs(marker)


JAVA_BOT = """
import java.net.*; import java.nio.*; import java.nio.channels.*;
public class Bot {
    public static void main(String[] args) throws Exception {
        var path = System.getenv("SCOUT_ADDRESS").substring("unix:".length());
        try (var channel = SocketChannel.open(StandardProtocolFamily.UNIX)) {
            channel.connect(UnixDomainSocketAddress.of(path));
            channel.write(ByteBuffer.wrap("java here\\n".getBytes()));
            var buffer = ByteBuffer.allocate(100);
            channel.read(buffer);
            System.out.println(new String(buffer.array(), 0, buffer.position()).trim());
        }
    }
}
"""


def test_a_java_bot_runs_with_the_hosts_jdk(host: Host) -> None:
    code = host.root / "bots" / "javabot" / "code"
    code.mkdir(parents=True)
    (code / "Bot.java").write_text(JAVA_BOT)
    subprocess.run(["javac", "Bot.java"], cwd=code, check=True)
    subprocess.run(["jar", "cfe", "bot.jar", "Bot", "Bot.class"], cwd=code, check=True)
    outcome = asyncio.run(host.run(
        "", name="javabot",
        manifest='runtime = "java"\ncommand = ["java", "-jar", "bot.jar"]\n',
        limits=SandboxLimits(**{**LIMITS.__dict__, "memory_mb": 256, "cpu_seconds": 30})))
    assert outcome.reason == "exited with status 0", outcome.output_tail
    assert "echo java here" in outcome.output_tail


NODE_BOT = """
const net = require("net");
const path = process.env.SCOUT_ADDRESS.replace(/^unix:/, "");
const socket = net.createConnection(path, () => socket.write("node here\\n"));
socket.on("data", (data) => { console.log(data.toString().trim()); socket.end(); });
"""


def test_a_node_bot_runs_with_the_hosts_node(host: Host) -> None:
    code = host.root / "bots" / "nodebot" / "code"
    code.mkdir(parents=True)
    (code / "bot.js").write_text(NODE_BOT)
    outcome = asyncio.run(host.run(
        "", name="nodebot", manifest='runtime = "node"\ncommand = ["node", "bot.js"]\n'))
    assert outcome.reason == "exited with status 0", outcome.output_tail
    assert "echo node here" in outcome.output_tail


def test_a_fork_bomb_leaves_a_bot_running_beside_it_unaffected(host: Host) -> None:
    bomb = """
        import os, time
        while True:
            try:
                os.fork()
            except OSError:
                time.sleep(0.01)
    """
    patient = """
        import os, socket, time
        time.sleep(1.0)
        with socket.socket(socket.AF_UNIX) as s:
            s.connect(os.environ["SCOUT_ADDRESS"].removeprefix("unix:"))
            s.sendall(f"uid {os.getuid()}\\n".encode())
            print(s.recv(100).decode().strip())
    """

    async def scenario() -> tuple[RunOutcome, RunOutcome]:
        limits = SandboxLimits(**{**LIMITS.__dict__, "cpu_seconds": 30})
        return await asyncio.gather(host.run(bomb, name="bomb", limits=limits),
                                    host.run(patient, name="patient", limits=limits))

    bombed, patient_outcome = asyncio.run(scenario())
    assert bombed.reason == "killed: reached the limit of 16 processes and threads"
    assert patient_outcome.reason == "exited with status 0", patient_outcome.output_tail
    assert "echo uid" in patient_outcome.output_tail


def test_bots_running_at_once_run_under_different_uids_as_root(host: Host) -> None:
    source = """
        import os, time
        time.sleep(0.5)
        print("uid", os.getuid(), "gid", os.getgid(), "groups", os.getgroups())
    """

    async def scenario() -> list[RunOutcome]:
        return list(await asyncio.gather(*(host.run(source, name=f"b{index}")
                                           for index in range(3))))

    outcomes = asyncio.run(scenario())
    lines = [next(line for line in outcome.output_tail.splitlines() if line.startswith("uid"))
             for outcome in outcomes]
    uids = {int(line.split()[1]) for line in lines}
    if os.geteuid() == 0:
        assert len(uids) == 3 and 0 not in uids, lines
        assert all(line.endswith("groups []") for line in lines), lines
    else:
        assert uids == {os.getuid()}


def test_a_uid_whose_processes_are_still_running_is_not_leased_again() -> None:
    """A finished bot's processes may outlive its lease for a moment; they would count against
    the next bot's process limit, so their uid is passed over."""
    base = os.getuid() if os.geteuid() != 0 else UID_BASE + UID_COUNT - 8
    lingering = subprocess.Popen(["sleep", "30"], user=base if os.geteuid() == 0 else None)
    try:
        lease = lease_uid(base, 2)
        try:
            assert lease.uid == base + 1
        finally:
            lease.release()
    finally:
        lingering.kill()
        lingering.wait()
    if os.geteuid() == 0:  # as root the uid is free again once its process is gone
        lease = lease_uid(base, 2)
        lease.release()
        assert lease.uid == base


HOST_SCRIPT = """
import asyncio, sys
from pathlib import Path
from scout_arena.sandbox import Sandbox, parse_manifest

async def main() -> None:
    root, socket_path = Path(sys.argv[1]), Path(sys.argv[2])
    server = await asyncio.start_unix_server(lambda reader, writer: None, str(socket_path))
    process = await Sandbox().start(
        name="orphan", code_dir=root / "code", data_dir=root / "data", socket_path=socket_path,
        manifest=parse_manifest((root / "code" / "scout-bot.toml").read_text()))
    while "asleep" not in process.output_tail():
        await asyncio.sleep(0.05)
    print("started", flush=True)
    await asyncio.sleep(3600)

asyncio.run(main())
"""


def test_a_bot_dies_with_the_process_that_hosts_it(host: Host) -> None:
    marker = f"orphan-{os.getpid()}"
    host.bot_folder("orphan", "import time\nprint('asleep', flush=True)\ntime.sleep(3600)\n",
                    f'runtime = "python"\ncommand = ["python", "bot.py", "{marker}"]\n')
    node = subprocess.Popen([sys.executable, "-c", HOST_SCRIPT, str(host.root / "bots" / "orphan"),
                             str(host.socket_dir / "orphan.sock")], stdout=subprocess.PIPE,
                            text=True)
    try:
        assert node.stdout is not None and node.stdout.readline().strip() == "started"
        assert not no_process_runs(marker)
    finally:
        node.kill()
        node.wait()
    deadline = time.monotonic() + PATIENCE_S
    while not no_process_runs(marker) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert no_process_runs(marker)


def test_a_binary_bot_runs_its_own_program_with_its_arguments(host: Host) -> None:
    code = host.root / "bots" / "binbot" / "code"
    (code / "bin").mkdir(parents=True)
    (code / "bin" / "bot").write_text('#!/bin/sh\necho "binary $0 $1 $2 uid=$(id -u)"\n')
    (code / "bin" / "bot").chmod(0o755)
    outcome = asyncio.run(host.run(
        "", name="binbot",
        manifest='runtime = "binary"\ncommand = ["bin/bot", "a b", "$(reboot)"]\n'))
    assert outcome.reason == "exited with status 0", outcome.output_tail
    assert "binary /bot/bin/bot a b $(reboot) uid=" in outcome.output_tail


def test_a_program_killed_by_the_file_size_limit_says_so(host: Host) -> None:
    code = host.root / "bots" / "ddbot" / "code"
    code.mkdir(parents=True)
    (code / "fill").write_text("#!/bin/sh\nexec dd if=/dev/zero of=/bot/data/big bs=64k count=64\n")
    (code / "fill").chmod(0o755)
    limits = SandboxLimits(**{**LIMITS.__dict__, "file_size_mb": 1})
    outcome = asyncio.run(host.run("", name="ddbot", limits=limits,
                                   manifest='runtime = "binary"\ncommand = ["fill"]\n'))
    assert outcome.reason == "killed: file size limit of 1 MB", outcome.output_tail


def test_links_a_bot_leaves_in_its_data_folder_are_not_followed_by_the_host(
        host: Host) -> None:
    victim = host.root / "host-file"
    victim.write_text("the node's")
    source = f"""
        import os
        os.symlink("{victim}", "/bot/data/link-to-host-file")
        os.symlink("{host.root}", "/bot/data/link-to-host-folder")
        print("planted")
    """
    first = asyncio.run(host.run(source))
    assert "planted" in first.output_tail, first.output_tail
    second = asyncio.run(host.run("print('second run')\n"))
    assert second.reason == "exited with status 0", second.output_tail
    assert victim.stat().st_uid == os.getuid() and host.root.stat().st_uid == os.getuid()
