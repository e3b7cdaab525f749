"""What an operator relies on when running a referee or a ladder: the log names the port a
server bound, health tells the truth (gRPC health and the HTTP /livez and /readyz beside the
metrics), a config file stands in for a long command line, and the metrics endpoint can ask
for a token and speak TLS. Real processes on 127.0.0.1 where the behaviour is the process's."""

from __future__ import annotations

import re
import subprocess
import time
from pathlib import Path

from referee_support import SCOUT_ARENA, stop


def wait_for_text(path: Path, pattern: str, timeout: float = 30.0) -> re.Match[str]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = re.search(pattern, path.read_text(errors="replace"))
        if found is not None:
            return found
        time.sleep(0.05)
    raise AssertionError(f"{pattern!r} not in {path}:\n{path.read_text(errors='replace')}")


def test_the_missing_admin_token_warning_names_the_port_the_referee_bound(
        tmp_path: Path) -> None:
    log = tmp_path / "referee.log"
    process = subprocess.Popen(
        [*SCOUT_ARENA, "referee", "serve", "--port", "0", "--records", str(tmp_path / "r")],
        stdout=subprocess.PIPE, stderr=log.open("w"), text=True)
    try:
        assert process.stdout is not None
        address = process.stdout.readline().split("listening on", 1)[1].strip()
        assert not address.endswith(":0")
        warning = wait_for_text(log, r"no --admin-token: .* reaches (\S+) ")
        assert warning.group(1) == address
    finally:
        stop(process)
