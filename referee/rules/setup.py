"""Builds the optional C move generators (``scout_rules._speedups``) when a compiler is present.

``optional=True``: without a compiler or the Python headers the build warns and goes on, and
`scout_rules.moves` uses its pure-Python functions (``moves.COMPILED`` is then False)."""

from setuptools import Extension, setup  # type: ignore[import-untyped]

setup(ext_modules=[Extension("scout_rules._speedups", ["src/scout_rules/_speedups.c"],
                             optional=True, extra_compile_args=["-O2"])])
