"""The host of the sandbox tests (tests/test_sandbox_*.py): a Unix-socket echo server standing in
for the referee, the small limits they run under, and the bots they start."""

from __future__ import annotations

import asyncio
import os
import tempfile
import textwrap
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

LIMITS = SandboxLimits(
    memory_mb=64,
    cpu_seconds=1,
    processes=16,
    open_files=64,
    file_size_mb=4,
    output_bytes=64 * 1024,
    data_mb=4,
    tmp_mb=4,
    data_files=500,
)


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
            manifest or 'runtime = "python"\ncommand = ["python", "bot.py"]\n'
        )
        return code

    async def start(
        self,
        source: str,
        *,
        name: str = "bot",
        limits: SandboxLimits = LIMITS,
        manifest: str | None = None,
    ) -> HostedProcess:
        code = self.bot_folder(name, source, manifest)
        sandbox = Sandbox(limits)
        return await sandbox.start(
            name=name,
            code_dir=code,
            data_dir=self.root / "bots" / name / "data",
            socket_path=self.socket_dir / f"{name}.sock",
            manifest=parse_manifest((code / "scout-bot.toml").read_text()),
        )

    async def run(
        self,
        source: str,
        *,
        name: str = "bot",
        limits: SandboxLimits = LIMITS,
        manifest: str | None = None,
    ) -> RunOutcome:
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


@pytest.fixture(name="host")
def host_fixture(tmp_path: Path) -> Iterator[Host]:
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
