"""Static bearer tokens in kube-apiserver's `--token-auth-file` format: one CSV line `token,user,uid,"g1,g2"`.

`ensure_token_file` writes the file on first start with tokens for the admin (system:masters), the
scheduler (system:kube-scheduler), the controller manager (system:kube-controller-manager; added to
an older file at the next start) and the local node (system:node:<hostname>, group system:nodes);
`issue_token` adds a line for any other user. The authenticator re-reads the file when it changes, so an
issued token works without a restart.
"""

from __future__ import annotations

import csv
import io
import secrets
import socket
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from apiserver.auth import (
    ADMIN_USER,
    CONTROLLER_MANAGER_USER,
    MASTERS_GROUP,
    NODE_USER_PREFIX,
    NODES_GROUP,
    SCHEDULER_USER,
)
from apiserver.auth.files import write_private

TOKEN_FILE_NAME = "tokens.csv"


@dataclass(frozen=True)
class TokenEntry:
    token: str
    user: str
    uid: str
    groups: tuple[str, ...]


def local_node_name() -> str:
    """The kubelet's default node name: the short host name, lower-cased (as agent/apis/config.py does)."""
    return socket.gethostname().split(".")[0].lower()


def parse_token_file(text: str, source: str = "token file") -> list[TokenEntry]:
    """Lines of kube's CSV; fewer than 3 columns is an error naming the line, as kube-apiserver refuses it."""
    entries: list[TokenEntry] = []
    for number, row in enumerate(csv.reader(io.StringIO(text)), start=1):
        if not row or (len(row) == 1 and not row[0].strip()) or row[0].lstrip().startswith("#"):
            continue
        if len(row) < 3:
            raise ValueError(
                f'{source}: line {number}: want token,user,uid[,"groups"], got {len(row)} column(s)'
            )
        groups = tuple(g.strip() for g in row[3].split(",") if g.strip()) if len(row) > 3 else ()
        entries.append(TokenEntry(row[0].strip(), row[1].strip(), row[2].strip(), groups))
    return entries


def _line(entry: TokenEntry) -> str:
    out = io.StringIO()
    csv.writer(out, lineterminator="\n").writerow(
        [entry.token, entry.user, entry.uid, ",".join(entry.groups)]
    )
    return out.getvalue()


def _new_entry(user: str, groups: Sequence[str]) -> TokenEntry:
    return TokenEntry(secrets.token_hex(24), user, str(uuid.uuid4()), tuple(groups))


def ensure_token_file(data_dir: Path, node_name: str | None = None) -> Path:
    """`<data_dir>/tokens.csv`, created (mode 0600) with the bootstrap users when it does not exist; a file
    from before the controller manager gets its line."""
    path = data_dir / TOKEN_FILE_NAME
    if path.exists():
        if token_for(path, CONTROLLER_MANAGER_USER) is None:
            issue_token(path, CONTROLLER_MANAGER_USER, [])
        return path
    data_dir.mkdir(parents=True, exist_ok=True)
    node = node_name or local_node_name()
    entries = [
        _new_entry(ADMIN_USER, [MASTERS_GROUP]),
        _new_entry(SCHEDULER_USER, []),
        _new_entry(CONTROLLER_MANAGER_USER, []),
        _new_entry(NODE_USER_PREFIX + node, [NODES_GROUP]),
    ]
    write_private(path, "".join(_line(e) for e in entries).encode())
    return path


def token_for(token_file: Path, user: str) -> str | None:
    for entry in parse_token_file(token_file.read_text(), str(token_file)):
        if entry.user == user:
            return entry.token
    return None


def issue_token(token_file: Path, user: str, groups: Sequence[str]) -> str:
    """The token of `user` in the file; a new line (new token) when the user has none yet."""
    text = token_file.read_text() if token_file.exists() else ""
    for entry in parse_token_file(text, str(token_file)):
        if entry.user == user:
            return entry.token
    entry = _new_entry(user, groups)
    if text and not text.endswith("\n"):
        text += "\n"
    write_private(token_file, (text + _line(entry)).encode())
    return entry.token
