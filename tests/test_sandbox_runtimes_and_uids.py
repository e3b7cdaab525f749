"""Real bots in real bubblewrap sandboxes (no referee: a Unix-socket echo server stands in; the
host is tests/support/sandbox_host.py). Limits are small so that the suite stays fast; they are
the same mechanisms as the defaults. The runtimes a bot may use (Java, Node, its own binary),
the uids bots run under, and what the host goes on doing beside a hostile bot or after its own
death."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import time

from scout_arena.sandbox import (
    RunOutcome,
    SandboxLimits,
)
from scout_arena.sandbox.identity import UID_BASE, UID_COUNT, lease_uid
from support.sandbox_host import (
    LIMITS,
    PATIENCE_S,
    Host,
    host_fixture,  # noqa: F401  (the *_fixture names: pytest fixtures)
    no_process_runs,
)

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
    outcome = asyncio.run(
        host.run(
            "",
            name="javabot",
            manifest='runtime = "java"\ncommand = ["java", "-jar", "bot.jar"]\n',
            limits=SandboxLimits(**{**LIMITS.__dict__, "memory_mb": 256, "cpu_seconds": 30}),
        )
    )
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
    outcome = asyncio.run(
        host.run("", name="nodebot", manifest='runtime = "node"\ncommand = ["node", "bot.js"]\n')
    )
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
        return await asyncio.gather(
            host.run(bomb, name="bomb", limits=limits),
            host.run(patient, name="patient", limits=limits),
        )

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
        return list(
            await asyncio.gather(*(host.run(source, name=f"b{index}") for index in range(3)))
        )

    outcomes = asyncio.run(scenario())
    lines = [
        next(line for line in outcome.output_tail.splitlines() if line.startswith("uid"))
        for outcome in outcomes
    ]
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
    host.bot_folder(
        "orphan",
        "import time\nprint('asleep', flush=True)\ntime.sleep(3600)\n",
        f'runtime = "python"\ncommand = ["python", "bot.py", "{marker}"]\n',
    )
    node = subprocess.Popen(
        [
            sys.executable,
            "-c",
            HOST_SCRIPT,
            str(host.root / "bots" / "orphan"),
            str(host.socket_dir / "orphan.sock"),
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
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
    outcome = asyncio.run(
        host.run(
            "",
            name="binbot",
            manifest='runtime = "binary"\ncommand = ["bin/bot", "a b", "$(reboot)"]\n',
        )
    )
    assert outcome.reason == "exited with status 0", outcome.output_tail
    assert "binary /bot/bin/bot a b $(reboot) uid=" in outcome.output_tail


def test_a_program_killed_by_the_file_size_limit_says_so(host: Host) -> None:
    code = host.root / "bots" / "ddbot" / "code"
    code.mkdir(parents=True)
    (code / "fill").write_text("#!/bin/sh\nexec dd if=/dev/zero of=/bot/data/big bs=64k count=64\n")
    (code / "fill").chmod(0o755)
    limits = SandboxLimits(**{**LIMITS.__dict__, "file_size_mb": 1})
    outcome = asyncio.run(
        host.run(
            "", name="ddbot", limits=limits, manifest='runtime = "binary"\ncommand = ["fill"]\n'
        )
    )
    assert outcome.reason == "killed: file size limit of 1 MB", outcome.output_tail


def test_links_a_bot_leaves_in_its_data_folder_are_not_followed_by_the_host(host: Host) -> None:
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
