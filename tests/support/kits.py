"""The starter kits as the tests build and start them, built once per test session.

Every kit is built with its own Makefile (the command its README gives) the first time any test
asks for it, and packaged (`make package`) the first time a test asks for its upload. The
results are kept in this module (`BUILDS`, `PACKAGES`), not in a fixture's cache, so that the
test modules that each register the `built_kits`/`kit_packages` fixtures still share one build
per kit per session (a cold Rust or C++ build takes one to two minutes).
"""

from __future__ import annotations

import subprocess
import threading
from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent.parent


@dataclass(frozen=True)
class Kit:
    name: str
    build: tuple[str, ...]
    command: tuple[str, ...]
    #: Flags that make the kit answer 700 ms late without its own safety fallback.
    miss_deadline: tuple[str, ...]


KITS = {
    "go": Kit(
        "go",
        ("make", "-C", "clients/go", "build"),
        ("clients/go/bin/scout-bot",),
        ("--slow-ms", "700"),
    ),
    "typescript": Kit(
        "typescript",
        ("make", "-C", "clients/typescript", "build"),
        ("node", "clients/typescript/dist/main.js"),
        ("--slow-ms", "700"),
    ),
    "rust": Kit(
        "rust",
        ("make", "-C", "clients/rust", "build"),
        ("clients/rust/target/release/scout-bot",),
        ("--slow-ms", "700", "--no-fallback"),
    ),
    "java": Kit(
        "java",
        ("make", "-C", "clients/java", "build"),
        ("java", "-jar", "clients/java/target/scout-bot.jar"),
        ("--slow-ms", "700", "--safety-margin-ms", "-2000"),
    ),
    "cpp": Kit(
        "cpp",
        ("make", "-C", "clients/cpp", "deps", "build"),
        ("clients/cpp/build/scout-bot",),
        ("--slow-ms", "700", "--no-fallback"),
    ),
}


def _make(command: tuple[str, ...]) -> str:
    """Runs a kit's make command from the repository root: "" when it worked, else its log."""
    done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=900)
    if done.returncode == 0:
        return ""
    return (
        f"`{' '.join(command)}` failed ({done.returncode}):\n{done.stdout[-3000:]}\n"
        f"{done.stderr[-3000:]}"
    )


#: Builds at once: a cold build waits on downloads (modules, crates, artefacts, packages) and
#: on single-threaded steps (Maven, tsc, cmake), which another kit's compiler can fill.
PARALLEL_BUILDS = 3


class KitBuilds(dict[str, str]):
    """Kit name -> build log ("" when it built). The first time a test asks for a kit, every kit
    the session's collected tests need (`wanted`, set by tests/conftest.py; the asked one at
    least) is built, side by side, and the test waits for all of them: no other test runs while
    a kit builds, and a run of one kit's tests builds only that kit."""

    def __init__(self) -> None:
        super().__init__()
        self.wanted: set[str] = set()
        self._lock = threading.Lock()

    def want(self, names: Iterable[str]) -> None:
        self.wanted.update(names)

    def __missing__(self, name: str) -> str:
        with self._lock:
            todo = sorted(({name} | self.wanted) - set(self))
            with ThreadPoolExecutor(max_workers=PARALLEL_BUILDS) as pool:
                made = pool.map(lambda kit: _make(KITS[kit].build), todo)
                logs = dict(zip(todo, made, strict=True))
            self.update(logs)
        return self[name]


class KitPackages(dict[str, str]):
    """Kit name -> `make package` log ("" when it made dist/scout-bot.tar.gz), each packaged
    the first time a test asks, after its build (which the package then reuses)."""

    def __init__(self, builds: dict[str, str]) -> None:
        super().__init__()
        self.builds = builds

    def __missing__(self, name: str) -> str:
        log = self.builds[name] or _make(("make", "-C", f"clients/{name}", "package"))
        self[name] = log
        return log


#: This session's builds and packages (see the module's docstring).
BUILDS = KitBuilds()
PACKAGES = KitPackages(BUILDS)


@pytest.fixture(scope="session")
def built_kits() -> dict[str, str]:
    """Every kit's build log, built as first needed (see `KitBuilds`)."""
    return BUILDS


@pytest.fixture(scope="session")
def kit_packages() -> dict[str, str]:
    """Every kit's `make package` log, packaged as first needed (see `KitPackages`)."""
    return PACKAGES


def require(built_kits: dict[str, str], name: str) -> Kit:
    """The kit, built (the test fails with the build's log otherwise)."""
    assert not built_kits[name], built_kits[name]
    return KITS[name]


def package_path(name: str) -> Path:
    return ROOT / "clients" / name / "dist" / "scout-bot.tar.gz"
