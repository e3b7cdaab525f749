"""A hosted greedy bot that counts its runs in its data folder (data/ kept between matches)."""
import os
import sys
from pathlib import Path

from scout_client.cli import main

data = Path(os.environ.get("SCOUT_DATA_DIR", "data"))
count = data / "count"
runs = int(count.read_text()) + 1 if count.exists() else 1
count.write_text(str(runs))
print(f"run number {runs}", file=sys.stderr, flush=True)
sys.exit(main(["run", "greedy"]))
