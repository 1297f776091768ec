"""The kubelet's atomic writer (pkg/volume/util/atomic_writer.go): a volume's files replaced all at once.

A reader of a ConfigMap, Secret or downwardAPI volume sees either the old files or the new ones, never a
mix. Layout of the volume directory:

    ..2026_11_25_17_46_29.123456789/   the payload of one write (a timestamped directory)
    ..data -> ..2026_11_25_17_46_29.123456789
    app.conf -> ..data/app.conf        one relative symlink per top-level name of the payload

`write(payload)`: if the payload equals what `..data` holds, nothing is done. Otherwise it is written
into a new timestamped directory (each file with its mode), the user-visible symlinks for new top-level
names are made, `..data_tmp` is pointed at the new directory and renamed over `..data` (the one atomic
step), then top-level names gone from the payload and the old timestamped directory are removed.
Because every symlink is relative, the volume reads the same wherever it is bind-mounted.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

DATA_DIR = "..data"
DATA_DIR_TMP = "..data_tmp"
MAX_PATH_BYTES = 4096
MAX_NAME_BYTES = 255


class PayloadError(ValueError):
    """A payload path kube would refuse (absolute, '..', starting with '..', too long)."""


@dataclass(frozen=True)
class FileProjection:
    data: bytes
    mode: int


def validate_path(path: str) -> None:
    """kube's validatePath: relative, no '..' element, not starting with '..', bounded lengths."""
    if not path:
        raise PayloadError("empty path")
    if len(path.encode()) > MAX_PATH_BYTES:
        raise PayloadError(f"path {path[:64]!r}... is longer than {MAX_PATH_BYTES} bytes")
    if path.startswith("/"):
        raise PayloadError(f"path {path!r} must be relative")
    parts = path.split("/")
    if any(len(p.encode()) > MAX_NAME_BYTES for p in parts):
        raise PayloadError(f"path {path[:64]!r} has an element longer than {MAX_NAME_BYTES} bytes")
    if ".." in parts:
        raise PayloadError(f"path {path!r} must not contain '..'")
    if path.startswith(".."):
        raise PayloadError(f"path {path!r} must not start with '..'")


FS_GROUP_READ = 0o440  # kube's roMask: what an fsGroup adds to a read-only volume's files


def _own_directory(path: Path, group: int | None) -> None:
    if group is not None:
        os.chown(path, -1, group)
        os.chmod(path, 0o2755)  # setgid: what is made inside keeps the group


def _timestamped_name() -> str:
    now = time.time_ns()
    stamp = time.strftime("%Y_%m_%d_%H_%M_%S", time.gmtime(now // 1_000_000_000))
    return f"..{stamp}.{now % 1_000_000_000:09d}"


def _current(target: Path) -> Path | None:
    try:
        name = os.readlink(target / DATA_DIR)
    except OSError:
        return None
    return target / name


def _mode(item: FileProjection, group: int | None) -> int:
    """The file's mode: with an fsGroup, group-readable too (kube's SetVolumeOwnership read-only mask)."""
    return item.mode | FS_GROUP_READ if group is not None else item.mode


def _same(directory: Path, payload: Mapping[str, FileProjection], group: int | None = None) -> bool:
    """Whether `directory` holds exactly this payload (contents, modes and, with an fsGroup, group)."""
    found: set[str] = set()
    for root, _dirs, files in os.walk(directory):
        for name in files:
            found.add(os.path.relpath(os.path.join(root, name), directory))
    if found != set(payload):
        return False
    for path, item in payload.items():
        full = directory / path
        try:
            st = full.stat()
            if st.st_mode & 0o7777 != _mode(item, group) or (group is not None and st.st_gid != group):
                return False
            if full.read_bytes() != item.data:
                return False
        except OSError:
            return False
    return True


def write(target: Path, payload: Mapping[str, FileProjection], group: int | None = None) -> bool:
    """Make `target` show `payload`; returns whether anything was written. With `group` (the pod's fsGroup)
    every file and directory belongs to that group, files group-readable and directories setgid, as the
    kubelet's SetVolumeOwnership leaves a read-only volume."""
    for path in payload:
        validate_path(path)
    target.mkdir(parents=True, exist_ok=True)
    old = _current(target)
    if old is not None and _same(old, payload, group):
        return False
    new = target / _timestamped_name()
    while new.exists():  # two writes in one nanosecond: only ever in tests
        new = target / _timestamped_name()
    new.mkdir(mode=0o755)
    try:
        _own_directory(new, group)
        for path, item in payload.items():
            full = new / path
            for parent in reversed(full.relative_to(new).parents[:-1]):
                if not (new / parent).is_dir():
                    (new / parent).mkdir(mode=0o755)
                    _own_directory(new / parent, group)
            fd = os.open(full, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600)
            try:
                os.write(fd, item.data)
                if group is not None:
                    os.fchown(fd, -1, group)
                os.fchmod(fd, _mode(item, group))
            finally:
                os.close(fd)
        top_level = {path.split("/", 1)[0] for path in payload}
        for name in top_level:
            link = target / name
            if not link.is_symlink():
                os.symlink(f"{DATA_DIR}/{name}", link)
        tmp = target / DATA_DIR_TMP
        with contextlib.suppress(FileNotFoundError):
            tmp.unlink()
        os.symlink(new.name, tmp)
        os.rename(tmp, target / DATA_DIR)  # the switch
    except BaseException:
        shutil.rmtree(new, ignore_errors=True)
        raise
    for entry in os.listdir(target):
        if not entry.startswith("..") and entry not in top_level:
            stale = target / entry
            if stale.is_symlink():
                stale.unlink()
    if old is not None and old != new:
        shutil.rmtree(old, ignore_errors=True)
    return True
