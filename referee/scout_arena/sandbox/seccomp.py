"""A seccomp filter for hosted bots: the few system calls that escape the limits or widen the
kernel surface, refused; everything else allowed.

Refused with EPERM:

* memory no limit counts: System V shared memory and message queues (held by the IPC namespace,
  in no process), POSIX message queues, ``memfd_create`` (written pages of an unmapped memfd are
  in no process either);
* new namespaces: ``unshare``, ``setns``, and ``clone`` with CLONE_NEWUSER (a user namespace of
  the bot's own would give it capabilities over new mount and network namespaces, and much of
  the kernel's attack surface); ``clone3`` answers ENOSYS, so that the C library falls back to
  ``clone``, whose flags a filter can read;
* kernel interfaces a bot has no use for: keyrings, bpf, perf events, userfaultfd, io_uring,
  ptrace and cross-process memory access, mounting (old and new API), modules, kexec, swap,
  reboot, syslog, accounting, quotas, handles, fanotify, LDT changes.

The filter is classic BPF built here (no libseccomp): it checks the architecture first (other
ABIs, such as x32 or i386 on x86_64, end the process) for x86_64 and aarch64; on other
machines :func:`filter_program` returns None and bots run without one (docs/deploy.md says so).
"""

from __future__ import annotations

import errno
import platform
import struct

AUDIT_ARCH = {"x86_64": 0xC000003E, "aarch64": 0xC00000B7}
X32_BIT = 0x40000000
CLONE_NEWUSER = 0x10000000

RET_ALLOW = 0x7FFF0000
RET_KILL_PROCESS = 0x80000000
RET_ERRNO = 0x00050000

LD_W_ABS = 0x20
JEQ_K = 0x15
JGE_K = 0x35
JSET_K = 0x45
RET_K = 0x06

OFFSET_NR = 0
OFFSET_ARCH = 4
OFFSET_ARG0_LOW = 16  # little-endian: the low half of args[0]

#: System call numbers, by machine: (x86_64, aarch64); None where a machine has no such call.
DENIED: dict[str, tuple[int | None, int | None]] = {
    "shmget": (29, 194), "shmat": (30, 196), "shmctl": (31, 195), "shmdt": (67, 197),
    "msgget": (68, 186), "msgsnd": (69, 189), "msgrcv": (70, 188), "msgctl": (71, 187),
    "mq_open": (240, 180), "memfd_create": (319, 279), "memfd_secret": (447, 447),
    "unshare": (272, 97), "setns": (308, 268),
    "keyctl": (250, 219), "add_key": (248, 217), "request_key": (249, 218),
    "bpf": (321, 280), "perf_event_open": (298, 241), "userfaultfd": (323, 282),
    "io_uring_setup": (425, 425), "io_uring_enter": (426, 426), "io_uring_register": (427, 427),
    "ptrace": (101, 117), "process_vm_readv": (310, 270), "process_vm_writev": (311, 271),
    "mount": (165, 40), "umount2": (166, 39), "pivot_root": (155, 41), "chroot": (161, 51),
    "open_tree": (428, 428), "move_mount": (429, 429), "fsopen": (430, 430),
    "fsconfig": (431, 431), "fsmount": (432, 432), "fspick": (433, 433),
    "mount_setattr": (442, 442),
    "init_module": (175, 105), "finit_module": (313, 273), "delete_module": (176, 106),
    "kexec_load": (246, 104), "kexec_file_load": (320, 294),
    "swapon": (167, 224), "swapoff": (168, 225), "reboot": (169, 142), "syslog": (103, 116),
    "acct": (163, 89), "quotactl": (179, 60), "name_to_handle_at": (303, 264),
    "open_by_handle_at": (304, 265), "fanotify_init": (300, 262), "modify_ldt": (154, None),
    "lookup_dcookie": (212, 18),
}
CLONE = (56, 220)
CLONE3 = (435, 435)


def _instruction(code: int, jt: int, jf: int, k: int) -> bytes:
    return struct.pack("=HBBI", code, jt, jf, k)


def filter_program(machine: str | None = None) -> bytes | None:
    """The filter for ``machine`` (default: this one) as bwrap's ``--seccomp`` reads it."""
    machine = machine or platform.machine()
    if machine not in AUDIT_ARCH:
        return None
    column = 0 if machine == "x86_64" else 1
    denied = sorted({number for numbers in DENIED.values()
                     if (number := numbers[column]) is not None})
    # Layout: arch check, load nr, [x32 check], one jump per denied call, clone, clone3,
    # allow, then the clone flags block, then the return instructions.
    program: list[tuple[int, int | str, int | str, int]] = [
        (LD_W_ABS, 0, 0, OFFSET_ARCH),
        (JEQ_K, 1, 0, AUDIT_ARCH[machine]),
        (RET_K, 0, 0, RET_KILL_PROCESS),
        (LD_W_ABS, 0, 0, OFFSET_NR),
    ]
    if machine == "x86_64":
        program.append((JGE_K, "kill", 0, X32_BIT))
    program += [(JEQ_K, "eperm", 0, number) for number in denied]
    program += [(JEQ_K, "clone", 0, CLONE[column]), (JEQ_K, "enosys", 0, CLONE3[column]),
                (RET_K, 0, 0, RET_ALLOW)]
    labels = {"clone": len(program)}
    program += [(LD_W_ABS, 0, 0, OFFSET_ARG0_LOW), (JSET_K, "eperm", 0, CLONE_NEWUSER),
                (RET_K, 0, 0, RET_ALLOW)]
    for label, value in (("eperm", RET_ERRNO | errno.EPERM),
                         ("enosys", RET_ERRNO | errno.ENOSYS), ("kill", RET_KILL_PROCESS)):
        labels[label] = len(program)
        program.append((RET_K, 0, 0, value))
    code = b""
    for index, (op, jt, jf, k) in enumerate(program):
        code += _instruction(op, _offset(labels, jt, index), _offset(labels, jf, index), k)
    return code


def _offset(labels: dict[str, int], target: int | str, index: int) -> int:
    if isinstance(target, int):
        return target
    offset = labels[target] - index - 1
    if not 0 <= offset <= 255:
        raise ValueError(f"seccomp jump to {target} out of range ({offset})")
    return offset
