"""Hosted bots: their manifest, the unpacking of their uploads, and the bubblewrap sandbox that
runs them (standard library only: no wire, no database). See docs/deploy.md, "Hosted bots: the
sandbox", for what it promises and what it does not.
"""

from scout_arena.sandbox.archive import UploadLimits, archive_kind, unpack_upload
from scout_arena.sandbox.errors import (
    ArchiveBomb,
    DuplicateEntry,
    LinkEntry,
    MalformedArchive,
    ManifestError,
    MissingManifest,
    MissingProgram,
    SpecialEntry,
    TooManyFiles,
    UnsafePath,
    UploadError,
    UploadTooLarge,
)
from scout_arena.sandbox.launcher import Sandbox, SandboxUnavailable
from scout_arena.sandbox.limits import SandboxLimits
from scout_arena.sandbox.manifest import MANIFEST_NAME, Manifest, Runtime, parse_manifest
from scout_arena.sandbox.pack import load_upload, pack_data, pack_folder
from scout_arena.sandbox.process import HostedProcess, RunOutcome
from scout_arena.sandbox.support import SandboxSupport, probe

__all__ = [
    "MANIFEST_NAME",
    "ArchiveBomb",
    "DuplicateEntry",
    "HostedProcess",
    "LinkEntry",
    "MalformedArchive",
    "Manifest",
    "ManifestError",
    "MissingManifest",
    "MissingProgram",
    "RunOutcome",
    "Runtime",
    "Sandbox",
    "SandboxLimits",
    "SandboxSupport",
    "SandboxUnavailable",
    "SpecialEntry",
    "TooManyFiles",
    "UnsafePath",
    "UploadError",
    "UploadLimits",
    "UploadTooLarge",
    "archive_kind",
    "load_upload",
    "pack_data",
    "pack_folder",
    "parse_manifest",
    "probe",
    "unpack_upload",
]
