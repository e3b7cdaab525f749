"""What the benchmark scripts share: writing their figures as JSON, and warning that the machine
was busy while they measured.

The benchmarks run as scripts (``python bench/engine.py``), so this folder is ``sys.path[0]`` and
they import this file as the sibling module ``common``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from rich.console import Console

JSON = dict[str, Any]


def write_json(path: str | Path, data: JSON, console: Console | None = None) -> Path:
    """Write every figure to ``path`` (making its folder), and say so on ``console``."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data, indent=1) + "\n", encoding="utf-8")
    if console is not None:
        console.print(f"[dim]wrote {path}[/]")
    return path


def warn_busy_machine(console: Console, evidence: str, advice: str) -> None:
    """Other load on the machine skewed the measurements: what shows it, and which figures
    still hold."""
    console.print(f"[yellow]warning: {evidence}; {advice}[/]")
