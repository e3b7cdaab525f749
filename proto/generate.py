"""Regenerate the Python stubs from proto/ (the single source). Run via `make proto`.

Usage: python proto/generate.py [OUT_DIR]   (default: proto/python/src)
"""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

from grpc_tools import protoc

ROOT = Path(__file__).resolve().parent.parent
PROTO_DIR = ROOT / "proto"
DEFAULT_OUT = ROOT / "proto" / "python" / "src"
PACKAGE = Path("scout") / "v1"


def generate(out_dir: Path) -> list[Path]:
    """Write scout/v1/*_pb2.py, *_pb2.pyi and *_pb2_grpc.py(i) under out_dir; return them."""
    target = out_dir / PACKAGE
    if target.exists():
        shutil.rmtree(target)
    target.mkdir(parents=True)
    protos = sorted(str(p.relative_to(PROTO_DIR)) for p in (PROTO_DIR / PACKAGE).glob("*.proto"))
    args = [
        "grpc_tools.protoc",
        f"-I{PROTO_DIR}",
        f"-I{Path(protoc.__file__).parent / '_proto'}",
        f"--python_out={out_dir}",
        f"--mypy_out={out_dir}",
        f"--grpc_python_out={out_dir}",
        f"--mypy_grpc_out={out_dir}",
        *protos,
    ]
    # protoc finds the mypy plugins (protoc-gen-mypy*) on PATH, beside this interpreter.
    os.environ["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"
    if protoc.main(args) != 0:
        raise SystemExit("protoc failed")
    (out_dir / "scout" / "__init__.py").write_text('"""Generated protobuf packages."""\n')
    (target / "__init__.py").write_text('"""Generated from proto/scout/v1; never edit."""\n')
    (target / "py.typed").write_text("")
    return sorted(p for p in target.rglob("*") if p.is_file())


if __name__ == "__main__":
    out = Path(sys.argv[1]) if len(sys.argv) > 1 else DEFAULT_OUT
    for path in generate(out):
        print(path.relative_to(out))
