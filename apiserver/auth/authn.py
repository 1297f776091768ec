"""Bearer-token authentication against a `--token-auth-file` (kube's tokenfile authenticator).

The file is re-read when its mtime, size or inode changes (checked at most every `recheck_seconds`), so tokens
added by `issue_token` or by hand are honoured without a restart; a file that stops parsing keeps the
last good set.
"""

from __future__ import annotations

import logging
from pathlib import Path

from apiserver.auth import AUTHENTICATED_GROUP, UserInfo
from apiserver.auth.files import FileWatch
from apiserver.auth.tokens import parse_token_file

log = logging.getLogger(__name__)


class TokenAuthenticator:
    def __init__(self, path: Path, recheck_seconds: float = 0.25) -> None:
        self._watch = FileWatch(path, recheck_seconds)
        self._users = self._read()

    @classmethod
    def from_file(cls, path: Path) -> TokenAuthenticator:
        """Raises OSError / ValueError (naming the file and line) when the file cannot be read at start."""
        return cls(path)

    def _read(self) -> dict[str, UserInfo]:
        path = self._watch.path
        users: dict[str, UserInfo] = {}
        for e in parse_token_file(path.read_text(), str(path)):
            groups = e.groups if AUTHENTICATED_GROUP in e.groups else (*e.groups, AUTHENTICATED_GROUP)
            users[e.token] = UserInfo(e.user, e.uid, groups)
        return users

    def _maybe_reload(self) -> None:
        if not self._watch.changed():
            return
        try:
            self._users = self._read()
        except (OSError, ValueError) as exc:
            log.warning("keeping the previous tokens: %s", exc)

    def authenticate(self, authorization_header: str | None) -> UserInfo | None:
        if not authorization_header:
            return None
        scheme, _, token = authorization_header.strip().partition(" ")
        token = token.strip()
        if scheme.lower() != "bearer" or not token:
            return None
        self._maybe_reload()
        return self._users.get(token)
