"""Reading and writing cgroup interface files, with kernel errors turned into CgroupError."""

from __future__ import annotations

import errno
import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress

from agent.cm.cgroups.api import CgroupError
from kubenode.cgroupsweep import removed_meanwhile

_HINTS = {
    errno.EINVAL: "the kernel refused the value (for a cpu quota: it may exceed the parent's quota)",
    errno.ENOSPC: "no CPUs or memory nodes in the cpuset",
    errno.EBUSY: "the cgroup is in use",
}


def display(path: str | bytes) -> str:
    return os.fsdecode(path)


def kernel_error(cgroup: str, file: str, err: OSError) -> CgroupError:
    """The CgroupError for a kernel error on the cgroup's file (raise it `from err`)."""
    problem = err.strerror or str(err)
    hint = _HINTS.get(err.errno or 0)
    return CgroupError(cgroup, file, f"{problem} ({hint})" if hint else problem)


@contextmanager
def kernel_errors(cgroup: str, file: str) -> Iterator[None]:
    """Re-raise OSError from the block as CgroupError naming the cgroup and file."""
    try:
        yield
    except OSError as err:
        raise kernel_error(cgroup, file, err) from err


def read_file(directory: str, file: str) -> str:
    with kernel_errors(directory, file), open(os.path.join(directory, file), encoding="ascii") as handle:
        return handle.read().strip()


def read_flat_key(directory: str, file: str, key: str) -> int:
    """The value of `key` in a flat-keyed file (`name value` lines: memory.events, memory.oom_control); 0 if
    the kernel does not report it."""
    for line in read_file(directory, file).splitlines():
        name, _, value = line.partition(" ")
        if name == key:
            return int(value)
    return 0


def write_file(directory: str, file: str, value: str) -> None:
    """Write an existing interface file; never creates one (a missing file is an error, as in the kernel)."""
    with kernel_errors(directory, file):
        fd = os.open(os.path.join(directory, file), os.O_WRONLY | os.O_TRUNC)
        try:
            os.write(fd, value.encode("ascii"))
        finally:
            os.close(fd)


def read_pids(procs_path: str) -> set[int]:
    """The pids in one cgroup.procs file; a cgroup removed meanwhile holds none."""
    try:
        with open(procs_path, encoding="ascii") as handle:
            return {int(line) for line in handle if line.strip()}
    except OSError as err:
        if removed_meanwhile(err):
            return set()
        raise


def tree_pids(directory: str) -> set[int]:
    """Every pid in the cgroup at `directory` and in its sub-cgroups (none if it does not exist)."""
    pids = read_pids(f"{directory}/cgroup.procs")
    try:
        entries = os.scandir(directory)
    except OSError:
        return pids  # removed meanwhile, or never made (os.walk, used before, skipped these too)
    with entries:
        # A cgroup's entries are its interface files and its sub-cgroups; only the latter are directories.
        subdirs = [entry.path for entry in entries if entry.is_dir(follow_symlinks=False)]
    for sub in subdirs:
        pids |= tree_pids(sub)
    return pids


def remove_tree(directory: str, rmdir: Callable[[str], None] = os.rmdir) -> None:
    """Remove a cgroup directory and its sub-cgroups, deepest first; a missing one is fine."""
    for current, _subdirs, _files in os.walk(directory, topdown=False):
        with kernel_errors(current, ""), suppress(FileNotFoundError):
            rmdir(current)


def subdirectories(directory: str) -> set[str]:
    try:
        with os.scandir(directory) as entries:
            return {entry.name for entry in entries if entry.is_dir(follow_symlinks=False)}
    except FileNotFoundError:
        return set()
