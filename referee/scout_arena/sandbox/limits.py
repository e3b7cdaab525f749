"""What one hosted bot may use, equal for every bot (the point of hosting: fair compute).

Each limit is enforced twice where the kernel allows: by an rlimit on every process of the bot
(a hard ceiling no process passes) and by the host's watchdog on the whole process tree (which
kills the bot and says why). See docs/deploy.md, "Hosted bots: the sandbox".
"""

from __future__ import annotations

from dataclasses import dataclass, fields

KiB = 1024
MiB = 1024 * KiB
#: The last part of a bot's output the host keeps (what its owner reads).
OUTPUT_TAIL_BYTES = 64 * KiB


@dataclass(frozen=True)
class SandboxLimits:
    memory_mb: int = 512
    cpu_seconds: int = 600
    processes: int = 64
    open_files: int = 256
    file_size_mb: int = 64
    output_bytes: int = 1 * MiB
    data_mb: int = 64
    tmp_mb: int = 64
    #: Files and folders the data folder may hold (each costs an inode and a scan).
    data_files: int = 10_000

    def __post_init__(self) -> None:
        for field in fields(self):
            value = getattr(self, field.name)
            if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
                raise ValueError(f"SandboxLimits.{field.name} must be a positive integer, "
                                 f"not {value!r}")

    def rlimit_args(self, processes: int | None = None) -> list[str]:
        """``prlimit`` options for every process of the bot (soft = hard, except CPU, whose soft
        limit sends SIGXCPU a few seconds before the hard one kills).

        Memory is RLIMIT_DATA (writable private memory) at twice the limit: a process cannot map
        more, while the watchdog holds the tree's resident memory to the limit. RLIMIT_AS would
        refuse the JVM and V8, which reserve far more address space than they use.
        """
        nproc = self.processes if processes is None else processes
        data = 2 * self.memory_mb * MiB
        fsize = self.file_size_mb * MiB
        return [f"--data={data}:{data}", f"--cpu={self.cpu_seconds}:{self.cpu_seconds + 5}",
                f"--nproc={nproc}:{nproc}", f"--nofile={self.open_files}:{self.open_files}",
                f"--fsize={fsize}:{fsize}", "--core=0:0", "--memlock=0:0"]


DEFAULT_LIMITS = SandboxLimits()


def size_text(count: int) -> str:
    """``count`` bytes in words: "1 MiB", "64 KiB", "100 bytes"."""
    for unit, size in (("GiB", 1024 * MiB), ("MiB", MiB), ("KiB", KiB)):
        if count >= size and count % size == 0:
            return f"{count // size} {unit}"
    return f"{count} bytes"
