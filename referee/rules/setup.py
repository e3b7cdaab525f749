"""Builds the optional C cores when a compiler is present: the move generators
(``scout_rules._speedups``) and the greedy round playout (``scout_rules._playout``).

``optional=True``: without a compiler or the Python headers the build warns and goes on, and
the package uses its pure-Python functions (``moves.COMPILED`` and ``playout.COMPILED`` say).
"""

from setuptools import Extension, setup  # type: ignore[import-untyped]

_HEADERS = ["src/scout_rules/_groups.h", "src/scout_rules/_objects.h"]

setup(ext_modules=[
    Extension("scout_rules._speedups", ["src/scout_rules/_speedups.c"], depends=_HEADERS,
              optional=True, extra_compile_args=["-O2"]),
    Extension("scout_rules._playout", ["src/scout_rules/_playout.c"], depends=_HEADERS,
              optional=True, extra_compile_args=["-O2"]),
])
