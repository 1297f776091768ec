"""Writing the secrets this package makes (tokens, keys, kubeconfigs): mode 0600, fsync, atomic replace;
and noticing that a file the server reads (tokens, RBAC policy) changed."""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path

from kubenode.atomicfile import write_atomically


def write_private(path: Path, data: bytes) -> None:
    """A reader sees the old file or the whole new one, never a half-written token or key.

    write_atomically's temporary file is created 0600 (mkstemp), so the secret is private before the rename.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    write_atomically(path, data)


class FileWatch:
    """Says when a file changed (its mtime, size or inode), looking at most every `recheck_seconds`: the
    token file and the RBAC policy file are read again when they change, without a restart."""

    def __init__(self, path: Path, recheck_seconds: float = 0.25) -> None:
        self.path = path
        self._recheck = recheck_seconds
        self._lock = threading.Lock()
        self._checked_at = time.monotonic()
        self._stamp = self._stat()

    def _stat(self) -> tuple[int, int, int] | None:
        try:
            st = os.stat(self.path)
        except OSError:
            return None
        return (st.st_mtime_ns, st.st_size, st.st_ino)

    def changed(self) -> bool:
        now = time.monotonic()
        if now - self._checked_at < self._recheck:
            return False
        with self._lock:
            self._checked_at = now
            stamp = self._stat()
            if stamp == self._stamp:
                return False
            self._stamp = stamp
            return True
