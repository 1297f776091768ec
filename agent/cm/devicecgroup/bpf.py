"""bpf(2) for cgroup v2 device programs: load, attach, query, detach, and `replace_device_program`.

Flow (wiring): on a cgroup v2 host the runtime calls `replace_device_program(container_cgroup_dir, rules)`
after making the container's cgroup and before the container's process joins it, and again on any
update; `rules` is `rules.container_rules(...)`. It guarantees exactly one device program on that
cgroup afterwards, whatever was there (none on a fresh cgroup; ours from before an update, an agent
restart or an adopted pod; several after a crash between attach and detach): as runc's
loadAttachCgroupDeviceFilter does, it lists the attached programs (BPF_PROG_QUERY), loads the new one,
attaches it with BPF_F_ALLOW_MULTI (with BPF_F_REPLACE in place of the old one when there is exactly
one; kernels before 5.6 answer EINVAL to that and we fall back), then detaches every other old one. A
flock on the cgroup directory serialises two callers on one cgroup (two agents during a restart), so
neither can leave the other's program behind. The program lives as long as it is attached: closing our
fd is enough, and removing the cgroup removes it.

A new container's cgroup (no program attached yet) gets a program loaded once per rule set and kept open
by the agent (`_LOADED`, the last `_LOADED_MAX` rule sets): every container with the default list shares
one program, as the verifier's run is most of what loading costs; the kernel counts each attachment on
its own, and the next update of that cgroup loads a program of its own as before (a cgroup never holds
one program twice).

ctypes and not a library: no well-kept PyPI package loads cgroup-device programs (devices.md: bpf-asm
assembles, pylibbpf wraps libbpf and needs ELF objects, bcc is not on PyPI); the four commands are a
few fixed structs. Syscall numbers: x86_64 321, aarch64 280. The kernel zero-fills bpf_attr past the
size passed. RLIMIT_MEMLOCK is not raised (runc raises it): the agent's limits are inherited by every
process pod, and since Linux 5.11 BPF memory is charged to the memory cgroup instead; an EPERM from
PROG_LOAD names the limit so an old kernel says why.
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import fcntl
import os
import platform
import struct
import threading
from collections import OrderedDict
from collections.abc import Iterable, Iterator
from pathlib import Path

from agent.cm.devicecgroup.bpfprog import INSTRUCTION_SIZE, LICENSE, device_program
from agent.cm.devicecgroup.rules import DeviceRule
from agent.util.libc import LIBC

SYS_BPF = {"x86_64": 321, "aarch64": 280}
PROG_LOAD, PROG_ATTACH, PROG_DETACH, PROG_GET_FD_BY_ID, PROG_QUERY = 5, 8, 9, 13, 16
PROG_TYPE_CGROUP_DEVICE = 15
ATTACH_CGROUP_DEVICE = 6
F_ALLOW_MULTI, F_REPLACE = 2, 4
MAX_PROGRAMS = 64  # the kernel's limit of programs per cgroup and attach type
# Kernels 6.17 until the fix in 7.2 write PROG_QUERY's u64 `revision` at offset 56 whatever size is
# passed (runc's comment): the query's attr is 64 bytes so that write lands in it.
_QUERY_ATTR_SIZE = 64
_LOAD_ATTR_SIZE = 40
_LOAD_RETRIES = 30  # the verifier answers EAGAIN when a signal interrupts it
_LOG_SIZES = (64 << 10, 512 << 10, 4 << 20, (16 << 20) - 1)  # runc's: 64 KiB, x8, up to 16 MiB - 1

_syscall = LIBC["syscall"]  # a private function object: its restype is ours alone
_syscall.restype = ctypes.c_long


class BpfError(OSError):
    """A bpf(2) command failed; the message names the command, the cgroup and the kernel's reason."""

    def __str__(self) -> str:
        return str(self.strerror)  # one line, without OSError's "[Errno N]"


def _sys_bpf() -> int:
    machine = platform.machine()
    if machine not in SYS_BPF:
        raise BpfError(errno.ENOSYS, f"bpf(2): no syscall number known for {machine}")
    return SYS_BPF[machine]


def _bpf(command: int, attr: ctypes.Array[ctypes.c_char], what: str) -> int:
    result = _syscall(ctypes.c_long(_sys_bpf()), ctypes.c_long(command), attr, ctypes.c_ulong(len(attr)))
    if result < 0:
        code = ctypes.get_errno()
        raise BpfError(code, f"{what}: {os.strerror(code)}")
    return int(result)


def _fd(number: int) -> int:
    """bpf(2) takes fd 0 as "no fd": move a new fd off 0, as runc does."""
    if number != 0:
        return number
    moved = fcntl.fcntl(number, fcntl.F_DUPFD_CLOEXEC, 1)
    os.close(number)
    return moved


def load_program(instructions: bytes, license: str = LICENSE) -> int:
    """BPF_PROG_LOAD a cgroup device program; returns its fd. A failure's error holds the verifier's log."""
    code = ctypes.create_string_buffer(instructions, len(instructions))
    license_text = ctypes.create_string_buffer(license.encode())
    attr = ctypes.create_string_buffer(_LOAD_ATTR_SIZE)
    count = len(instructions) // INSTRUCTION_SIZE
    struct.pack_into("<IIQQ", attr, 0, PROG_TYPE_CGROUP_DEVICE, count, ctypes.addressof(code),
                     ctypes.addressof(license_text))  # fmt: skip
    try:
        return _fd(_load(attr))
    except BpfError as first:
        if first.errno == errno.EPERM:
            raise BpfError(errno.EPERM, f"{first.strerror} (before Linux 5.11 BPF programs count against "
                           "RLIMIT_MEMLOCK; CAP_SYS_ADMIN or CAP_BPF is needed)") from None  # fmt: skip
        # Load again with the verifier's log on, to say why (the first try skips it: the fast path).
        for size in _LOG_SIZES:
            log = ctypes.create_string_buffer(size)
            struct.pack_into("<IIQ", attr, 24, 1, size, ctypes.addressof(log))
            try:
                return _fd(_load(attr))  # unexpected, but a program is a program
            except BpfError as again:
                if again.errno == errno.ENOSPC and size != _LOG_SIZES[-1]:
                    continue
                text = " | ".join(log.value.decode(errors="replace").split("\n")).strip(" |")
                raise BpfError(first.errno, f"{first.strerror}; verifier log: {text or '(empty)'}") from None
        raise


def _load(attr: ctypes.Array[ctypes.c_char]) -> int:
    for _ in range(_LOAD_RETRIES):
        try:
            return _bpf(PROG_LOAD, attr, "BPF_PROG_LOAD (cgroup device program)")
        except BpfError as exc:
            if exc.errno != errno.EAGAIN:
                raise
    return _bpf(PROG_LOAD, attr, "BPF_PROG_LOAD (cgroup device program)")


def attach(cgroup_fd: int, program_fd: int, flags: int = F_ALLOW_MULTI, replace_fd: int = 0) -> None:
    attr = ctypes.create_string_buffer(20)
    struct.pack_into("<IIIII", attr, 0, cgroup_fd, program_fd, ATTACH_CGROUP_DEVICE, flags, replace_fd)
    _bpf(PROG_ATTACH, attr, "BPF_PROG_ATTACH (BPF_CGROUP_DEVICE)")


def detach(cgroup_fd: int, program_fd: int) -> None:
    attr = ctypes.create_string_buffer(12)
    struct.pack_into("<III", attr, 0, cgroup_fd, program_fd, ATTACH_CGROUP_DEVICE)
    _bpf(PROG_DETACH, attr, "BPF_PROG_DETACH (BPF_CGROUP_DEVICE)")


def query(cgroup_fd: int) -> list[int]:
    """The ids of the device programs attached to this cgroup itself (not its parents'), in run order."""
    capacity = MAX_PROGRAMS
    for _ in range(10):
        ids = (ctypes.c_uint32 * capacity)()
        attr = ctypes.create_string_buffer(_QUERY_ATTR_SIZE)
        struct.pack_into("<IIIIQI", attr, 0, cgroup_fd, ATTACH_CGROUP_DEVICE, 0, 0, ctypes.addressof(ids),
                         capacity)  # fmt: skip
        try:
            _bpf(PROG_QUERY, attr, "BPF_PROG_QUERY (BPF_CGROUP_DEVICE)")
        except BpfError as exc:
            if exc.errno == errno.ENOSPC:  # more than we made room for: the kernel says how many
                capacity = struct.unpack_from("<I", attr, 24)[0]
                continue
            raise
        count = struct.unpack_from("<I", attr, 24)[0]
        return list(ids[:count])
    raise BpfError(errno.EAGAIN, "BPF_PROG_QUERY (BPF_CGROUP_DEVICE): the list kept changing")


def program_fd(program_id: int) -> int:
    attr = ctypes.create_string_buffer(4)
    struct.pack_into("<I", attr, 0, program_id)
    return _fd(_bpf(PROG_GET_FD_BY_ID, attr, f"BPF_PROG_GET_FD_BY_ID {program_id}"))


@contextlib.contextmanager
def _cgroup(cgroup_dir: Path) -> Iterator[int]:
    """The cgroup directory open and flocked (one replacement at a time per cgroup)."""
    try:
        fd = os.open(cgroup_dir, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    except OSError as exc:
        raise BpfError(exc.errno, f"cgroup {cgroup_dir}: {exc.strerror}") from None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield fd
    finally:
        os.close(fd)


@contextlib.contextmanager
def _naming(cgroup_dir: Path) -> Iterator[None]:
    try:
        yield
    except BpfError as exc:
        raise BpfError(exc.errno, f"cgroup {cgroup_dir}: {exc.strerror}") from None


def attached_programs(cgroup_dir: Path) -> list[int]:
    """The ids of the device programs attached to `cgroup_dir`."""
    with _cgroup(cgroup_dir) as fd, _naming(cgroup_dir):
        return query(fd)


_LOADED_MAX = 16
_LOADED: OrderedDict[bytes, int] = OrderedDict()  # program -> its fd, most recently used last
_loaded_lock = threading.Lock()


def _shared_program(program: bytes) -> int:
    """The fd of a loaded copy of `program` that stays open in the agent (loaded now if not yet)."""
    with _loaded_lock:
        fd = _LOADED.get(program)
        if fd is not None:
            _LOADED.move_to_end(program)
            return fd
        fd = load_program(program)
        _LOADED[program] = fd
        if len(_LOADED) > _LOADED_MAX:
            os.close(_LOADED.popitem(last=False)[1])  # attached copies stay: the kernel holds them
        return fd


_PROGRAMS: dict[tuple[DeviceRule, ...], bytes] = {}  # built once per rule list


def _program_for(rules: Iterable[DeviceRule]) -> bytes:
    key = tuple(rules)
    program = _PROGRAMS.get(key)
    if program is None:
        program = device_program(key)
        if len(_PROGRAMS) >= _LOADED_MAX * 4:
            _PROGRAMS.clear()
        _PROGRAMS[key] = program
    return program


def replace_device_program(cgroup_dir: Path, rules: Iterable[DeviceRule]) -> None:
    """Make the program for `rules` the one device program on `cgroup_dir` (see the module's docstring)."""
    program = _program_for(rules)  # a bad rule fails here, before anything is touched
    with _cgroup(cgroup_dir) as cgroup_fd, _naming(cgroup_dir):
        _replace(cgroup_fd, program)


def _replace(cgroup_fd: int, program: bytes) -> None:
    old_fds: list[int] = []
    new_fd = -1
    try:
        attached = query(cgroup_fd)
        if not attached:  # a new container's cgroup: the shared program, which this cgroup cannot hold yet
            attach(cgroup_fd, _shared_program(program))
            return
        for program_id in attached:
            try:
                old_fds.append(program_fd(program_id))
            except BpfError as exc:
                # runc skips programs an LSM hides from it: another program can only restrict more.
                if exc.errno not in (errno.EPERM, errno.EACCES):
                    raise
        new_fd = load_program(program)
        if len(old_fds) == 1:
            try:
                attach(cgroup_fd, new_fd, F_ALLOW_MULTI | F_REPLACE, old_fds[0])
                return
            except BpfError as exc:
                if exc.errno != errno.EINVAL:  # EINVAL: no BPF_F_REPLACE (Linux < 5.6)
                    raise
        attach(cgroup_fd, new_fd)
        for old in old_fds:
            detach(cgroup_fd, old)
    finally:
        for fd in [*old_fds, new_fd]:
            if fd >= 0:
                os.close(fd)
