"""Why an upload or a manifest is refused: one class per cause, each message naming the entry.

Every refusal is an :class:`UploadError`, so a caller that only reports the message catches one
class; callers that count or test causes catch the subclass.
"""

from __future__ import annotations


class UploadError(ValueError):
    """An upload (or its manifest) that the ladder refuses; the message says what and where."""


class UploadTooLarge(UploadError):
    """The archive itself is larger than the upload limit."""


class MalformedArchive(UploadError):
    """Not a .zip or .tar.gz, or one that does not read to its end."""


class UnsafePath(UploadError):
    """An entry whose name is absolute, climbs out with ``..``, or cannot be a file name."""


class LinkEntry(UploadError):
    """A symbolic or hard link: refused whatever it points at (links never enter a bot folder)."""


class SpecialEntry(UploadError):
    """A device, fifo, socket or other entry that is neither a file nor a folder."""


class DuplicateEntry(UploadError):
    """The same path twice (or a file where a folder is), which would make the result ambiguous."""


class ArchiveBomb(UploadError):
    """More unpacked bytes than allowed, or a file that expands beyond the allowed ratio."""


class TooManyFiles(UploadError):
    """More entries than the file limit."""


class MissingManifest(UploadError):
    """No ``scout-bot.toml`` at the root or inside a single top-level folder."""


class ManifestError(UploadError):
    """A ``scout-bot.toml`` that does not say, safely, how to start the bot."""


class MissingProgram(ManifestError):
    """The manifest names a program or script that is not in the upload."""
