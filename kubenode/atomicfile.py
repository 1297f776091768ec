"""Replace a file so that a crash, a power loss or a failed write leaves either the old file or the new one.

The data goes to a temporary file in the same directory (named `TEMP_PREFIX...`, so a reader can
sweep leftovers; mkstemp creates it 0600, so the new file may hold a secret), is fsynced, renamed
over the target, and the directory is fsynced so the rename itself is durable. On any failure the
temporary file is removed and the target untouched. With `durable=False` both fsyncs are left to the
caller (the agent's pod records batch them: agent/container/groupcommit.py); the replacement is still atomic
for any reader and survives the writer being killed, as the kernel holds it.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from pathlib import Path

TEMP_PREFIX = ".tmp-"


def write_atomically(path: Path, data: bytes, *, durable: bool = True) -> None:
    """Replace `path` with `data` so that a crash or a failed write leaves the old file or the new one."""
    fd, tmp = tempfile.mkstemp(prefix=f"{TEMP_PREFIX}{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as out:
            out.write(data)
            out.flush()
            if durable:
                os.fsync(out.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    if not durable:
        return
    dir_fd = os.open(path.parent, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(dir_fd)  # the rename itself survives a power loss
    finally:
        os.close(dir_fd)
