"""Loads the optional C extension ``_speedups`` once, for every module that has a C twin.

None when it was not built (no compiler where the package was installed) or when
``SCOUT_RULES_PURE`` is set to anything but ``0`` in the environment: the pure-Python code is
then in use everywhere, as the reference it always is."""

from __future__ import annotations

import os
from types import ModuleType


def _load() -> ModuleType | None:
    if os.environ.get("SCOUT_RULES_PURE", "") not in ("", "0"):
        return None
    try:
        from . import _speedups
    except ImportError:
        return None
    return _speedups


SPEEDUPS = _load()
