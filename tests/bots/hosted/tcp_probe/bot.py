"""A hosted bot that tries TCP to every host:port listed in its probe.txt and says what
happened on stderr, then plays greedy through its socket."""
import socket
import sys
from pathlib import Path

from scout_client.cli import main

for target in Path("probe.txt").read_text().split():
    host, _, port = target.rpartition(":")
    try:
        with socket.create_connection((host, int(port)), timeout=2):
            print(f"PROBE {target}: CONNECTED", file=sys.stderr, flush=True)
    except OSError as exc:
        print(f"PROBE {target}: refused ({exc})", file=sys.stderr, flush=True)
sys.exit(main(["run", "greedy"]))
