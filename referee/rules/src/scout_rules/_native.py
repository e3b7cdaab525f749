"""Loads the optional C extensions once, for every module that has a C twin: ``_speedups``
(the move generators) and ``_playout`` (greedy playouts).

Each is None when it was not built (no compiler where the package was installed) or when
``SCOUT_RULES_PURE`` is set to anything but ``0`` in the environment: the pure-Python code is
then in use everywhere, as the reference it always is."""

from __future__ import annotations

import importlib
import os
from types import ModuleType


def _load(name: str) -> ModuleType | None:
    if os.environ.get("SCOUT_RULES_PURE", "") not in ("", "0"):
        return None
    try:
        return importlib.import_module(f"{__package__}.{name}")
    except ImportError:
        return None


SPEEDUPS = _load("_speedups")
PLAYOUT = _load("_playout")
