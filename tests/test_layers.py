"""The layers import one way (rules -> record -> referee -> apps -> CLI), the rules package
needs the standard library only, the SDK runs without server code and the server without the
SDK. `make lint` runs the same contracts."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
LINT_IMPORTS = Path(sys.executable).parent / "lint-imports"

#: Imports these packages refuse in a fresh interpreter (a stand-in for "not installed").
BLOCKER = """
import importlib.abc, sys
class Block(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in {blocked!r}:
            raise ImportError(f"{{name}} is not installed here")
        return None
sys.meta_path.insert(0, Block())
"""


def _python(code: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=120, cwd=ROOT)


def test_import_contracts_hold() -> None:
    result = subprocess.run([str(LINT_IMPORTS), "--no-cache"], capture_output=True, text=True,
                            timeout=300, cwd=ROOT)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "0 broken" in result.stdout


def test_the_sdk_imports_and_plays_without_any_server_package() -> None:
    code = BLOCKER.format(blocked={"scout_arena", "scout_ladder"}) + (
        "import scout_client, scout_client.cli\n"
        "from scout_client import GreedyBot, RandomBot\n"
        "print('ok')\n")
    result = _python(code)
    assert result.returncode == 0 and result.stdout.strip() == "ok", result.stderr


def test_the_referee_ladder_and_tournaments_import_without_the_sdk() -> None:
    code = BLOCKER.format(blocked={"scout_client"}) + (
        "import scout_arena.server, scout_arena.tournament, scout_arena.web\n"
        "import scout_ladder.service\n"
        "print('ok')\n")
    result = _python(code)
    assert result.returncode == 0 and result.stdout.strip() == "ok", result.stderr


def test_the_blocker_really_blocks() -> None:
    result = _python(BLOCKER.format(blocked={"scout_client"}) + "import scout_client\n")
    assert result.returncode != 0 and "is not installed here" in result.stderr


def test_the_rules_package_imports_the_standard_library_only() -> None:
    """import-linter forbids the packages it is told of; this catches any other one."""
    package = ROOT / "referee" / "rules" / "src" / "scout_rules"
    outside: list[str] = []
    for path in sorted(package.glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module]
            else:
                continue
            outside += [f"{path.name}: {name}" for name in names
                        if name.split(".")[0] not in sys.stdlib_module_names]
    assert list(package.glob("*.py")) and outside == []
