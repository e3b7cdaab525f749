"""The committed Python stubs are exactly what proto/ generates."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parent.parent
COMMITTED = ROOT / "proto" / "python" / "src"


def _generator() -> ModuleType:
    spec = importlib.util.spec_from_file_location("proto_generate", ROOT / "proto" / "generate.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["proto_generate"] = module
    spec.loader.exec_module(module)
    return module


def test_committed_stubs_match_a_fresh_generation_from_proto(tmp_path: Path) -> None:
    fresh = _generator().generate(tmp_path)
    assert fresh, "the generator produced nothing"
    fresh_names = {p.relative_to(tmp_path) for p in fresh}
    committed_names = {p.relative_to(COMMITTED) for p in (COMMITTED / "scout" / "v1").rglob("*")
                       if p.is_file() and "__pycache__" not in p.parts}
    assert committed_names == fresh_names, "stub files added or missing: run `make proto`"
    for name in sorted(fresh_names):
        assert (COMMITTED / name).read_bytes() == (tmp_path / name).read_bytes(), (
            f"{name} drifted from proto/: run `make proto` and commit the result")


def test_every_proto_message_and_field_has_a_comment() -> None:
    """The style guide asks for a comment on every message and field; check the .proto text."""
    missing = []
    for proto in sorted((ROOT / "proto" / "scout" / "v1").glob("*.proto")):
        lines = proto.read_text().splitlines()
        for i, line in enumerate(lines):
            text = line.strip()
            is_decl = text.startswith(("message ", "enum ", "service ", "rpc ", "oneof ")) or (
                text.endswith(";") and "=" in text and not text.startswith(("option", "//")))
            if is_decl and not lines[i - 1].strip().startswith("//"):
                missing.append(f"{proto.name}:{i + 1}: {text}")
    assert not missing, "undocumented declarations:\n" + "\n".join(missing)


def test_enum_zero_values_are_unspecified() -> None:
    for proto in sorted((ROOT / "proto" / "scout" / "v1").glob("*.proto")):
        lines = proto.read_text().splitlines()
        for i, line in enumerate(lines):
            if line.strip().startswith("enum "):
                first = next(x.strip() for x in lines[i + 1:] if x.strip()
                             and not x.strip().startswith("//"))
                assert first.split("=")[0].strip().endswith("_UNSPECIFIED"), (proto.name, first)
