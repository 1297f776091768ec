"""Bearer-token authentication against a `--token-auth-file` (kube's tokenfile authenticator).

The file is re-read when its mtime, size or inode changes (checked at most every `recheck_seconds`), so tokens
added by `issue_token` or by hand are honoured without a restart; a file that stops parsing keeps the
last good set.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from pathlib import Path

from apiserver.auth import AUTHENTICATED_GROUP, UserInfo
from apiserver.auth.tokens import parse_token_file

log = logging.getLogger(__name__)


class TokenAuthenticator:
    def __init__(self, path: Path, recheck_seconds: float = 0.25) -> None:
        self._path = path
        self._recheck = recheck_seconds
        self._lock = threading.Lock()
        self._stamp: tuple[int, int, int] | None = None
        self._checked_at = float("-inf")
        self._users: dict[str, UserInfo] = {}
        self._load(force=True)

    @classmethod
    def from_file(cls, path: Path) -> TokenAuthenticator:
        """Raises OSError / ValueError (naming the file and line) when the file cannot be read at start."""
        return cls(path)

    def _load(self, force: bool = False) -> None:
        st = os.stat(self._path)
        stamp = (st.st_mtime_ns, st.st_size, st.st_ino)
        if stamp == self._stamp and not force:
            return
        try:
            entries = parse_token_file(self._path.read_text(), str(self._path))
        except (OSError, ValueError) as exc:
            if force:
                raise
            log.warning("keeping the previous tokens: %s", exc)
            return
        users: dict[str, UserInfo] = {}
        for e in entries:
            groups = e.groups if AUTHENTICATED_GROUP in e.groups else (*e.groups, AUTHENTICATED_GROUP)
            users[e.token] = UserInfo(e.user, e.uid, groups)
        self._users, self._stamp = users, stamp

    def _maybe_reload(self) -> None:
        now = time.monotonic()
        if now - self._checked_at < self._recheck:
            return
        with self._lock:
            self._checked_at = now
            try:
                self._load()
            except OSError as exc:
                log.warning("token file unreadable, keeping the previous tokens: %s", exc)

    def authenticate(self, authorization_header: str | None) -> UserInfo | None:
        if not authorization_header:
            return None
        scheme, _, token = authorization_header.strip().partition(" ")
        token = token.strip()
        if scheme.lower() != "bearer" or not token:
            return None
        self._maybe_reload()
        return self._users.get(token)
