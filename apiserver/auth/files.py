"""Writing the secrets this package makes (tokens, keys, kubeconfigs): mode 0600, fsync, atomic replace."""

from __future__ import annotations

from pathlib import Path

from kubenode.atomicfile import write_atomically


def write_private(path: Path, data: bytes) -> None:
    """A reader sees the old file or the whole new one, never a half-written token or key.

    write_atomically's temporary file is created 0600 (mkstemp), so the secret is private before the rename.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    write_atomically(path, data)
