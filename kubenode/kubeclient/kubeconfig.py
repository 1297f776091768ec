"""A kubeconfig of the plain forms read without the official client (whose import costs a process ~30 MiB).

`read_plain(path, context)` handles the kubeconfigs that daemons are given: a cluster with `server`,
`certificate-authority` or `certificate-authority-data`, `insecure-skip-tls-verify` and `tls-server-name`;
a user with a `token`, `client-certificate`/`client-key` (files or `-data`), or `username`/`password`.
Relative file paths are taken from the kubeconfig's directory, as kubectl does; inline data is written
once to a private temporary file (as the official loader does), removed when the process exits.
Anything else (exec and auth-provider plugins, tokenFile, proxies, a missing or odd field) returns None,
and the caller uses the official loader, which knows every form and words every error.
"""

from __future__ import annotations

import atexit
import base64
import contextlib
import os
import tempfile
from pathlib import Path
from typing import Any

import yaml

CLUSTER_KEYS = {"server", "certificate-authority", "certificate-authority-data", "insecure-skip-tls-verify"}
CLUSTER_KEYS |= {"tls-server-name"}
USER_KEYS = {"token", "client-certificate", "client-certificate-data", "client-key", "client-key-data"}
USER_KEYS |= {"username", "password"}

_written: list[str] = []


def _named(items: Any, name: str, key: str) -> dict[str, Any] | None:
    """The `key` mapping of the entry called `name` in a kubeconfig list (clusters, users, contexts)."""
    if not isinstance(items, list):
        return None
    for item in items:
        if isinstance(item, dict) and item.get("name") == name:
            value = item.get(key)
            return value if isinstance(value, dict) else None
    return None


def _file(base: Path, entry: dict[str, Any], key: str) -> str | None:
    """The path of `key` (relative to the kubeconfig's directory) or of its `-data` written out."""
    data = entry.get(f"{key}-data")
    if isinstance(data, str) and data:
        fd, path = tempfile.mkstemp(prefix="kubenode-kubeconfig-", suffix=f".{key}")  # 0600
        with os.fdopen(fd, "wb") as out:
            out.write(base64.b64decode(data, validate=True))
        if not _written:
            atexit.register(_remove_written)
        _written.append(path)
        return path
    value = entry.get(key)
    if isinstance(value, str) and value:
        return str(base / value)
    return None


def _remove_written() -> None:
    for path in _written:
        with contextlib.suppress(OSError):
            os.unlink(path)


def read_plain(path: Path | str, context: str | None) -> dict[str, Any] | None:
    """ClientConfig's fields (and `authorization`, the static header) for a plain kubeconfig, else None."""
    try:
        with open(path, encoding="utf-8") as handle:
            doc = yaml.safe_load(handle)
    except (OSError, ValueError, yaml.YAMLError):
        return None  # the official loader words the error
    if not isinstance(doc, dict) or doc.get("proxy-url"):
        return None
    name = context or doc.get("current-context")
    ctx = _named(doc.get("contexts"), str(name), "context") if name else None
    if ctx is None:
        return None
    cluster = _named(doc.get("clusters"), str(ctx.get("cluster")), "cluster")
    user = _named(doc.get("users"), str(ctx.get("user")), "user") if ctx.get("user") else {}
    if cluster is None or user is None or set(cluster) - CLUSTER_KEYS or set(user) - USER_KEYS:
        return None
    server = cluster.get("server")
    if not isinstance(server, str) or not server.startswith(("https://", "http://")):
        return None
    if not isinstance(cluster.get("insecure-skip-tls-verify", False), bool):
        return None
    base = Path(path).resolve().parent
    try:
        fields: dict[str, Any] = {
            "host": server.rstrip("/"),
            "verify_ssl": not cluster.get("insecure-skip-tls-verify", False),
            "ca_file": _file(base, cluster, "certificate-authority"),
            "cert_file": _file(base, user, "client-certificate"),
            "key_file": _file(base, user, "client-key"),
            "tls_server_name": cluster.get("tls-server-name") or None,
        }
    except (ValueError, OSError):
        return None  # bad base64 or an unwritable temp dir: the official loader says so
    token, username, password = user.get("token"), user.get("username"), user.get("password")
    if token:
        fields["authorization"] = f"Bearer {token}"
    elif username or password:
        pair = f"{username or ''}:{password or ''}".encode()
        fields["authorization"] = "Basic " + base64.b64encode(pair).decode()
    else:
        fields["authorization"] = None
    return fields
