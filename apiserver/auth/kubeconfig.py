"""kubeconfig files (client-go's clientcmd v1 Config) that kubectl and the Python client load unchanged."""

from __future__ import annotations

import base64
from pathlib import Path
from typing import Any

import yaml

from apiserver.auth.files import write_private

CLUSTER_NAME = "kubenode"


def kubeconfig_document(server: str, token: str, ca_pem: bytes | None, user: str = "admin") -> dict[str, Any]:
    cluster: dict[str, Any] = {"server": server}
    if ca_pem is not None:
        cluster["certificate-authority-data"] = base64.b64encode(ca_pem).decode()
    context = f"{user}@{CLUSTER_NAME}"
    return {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": CLUSTER_NAME, "cluster": cluster}],
        "users": [{"name": user, "user": {"token": token}}],
        "contexts": [
            {"name": context, "context": {"cluster": CLUSTER_NAME, "user": user, "namespace": "default"}}
        ],
        "current-context": context,
        "preferences": {},
    }


def write_kubeconfig(path: Path, server: str, token: str, ca_pem: bytes | None, user: str = "admin") -> None:
    """Write atomically with mode 0600 (it holds a bearer token)."""
    text = yaml.safe_dump(kubeconfig_document(server, token, ca_pem, user), sort_keys=False)
    write_private(path, text.encode())


def write_component_kubeconfigs(
    data_dir: Path, server: str, token_file: Path, ca_pem: bytes | None
) -> list[Path]:
    """Next to the admin kubeconfig, one for the scheduler (`scheduler.kubeconfig`) and one per node user in
    the token file (`node-<name>.kubeconfig`), so `kubenode scheduler` and `kubenode agent` can be pointed at
    this server at once. Rewritten at every start (the server URL may change)."""
    from apiserver.auth import NODE_USER_PREFIX, SCHEDULER_USER
    from apiserver.auth.tokens import parse_token_file

    written: list[Path] = []
    for entry in parse_token_file(token_file.read_text(), str(token_file)):
        if entry.user == SCHEDULER_USER:
            path = data_dir / "scheduler.kubeconfig"
        elif entry.user.startswith(NODE_USER_PREFIX):
            path = data_dir / f"node-{entry.user[len(NODE_USER_PREFIX) :]}.kubeconfig"
        else:
            continue
        write_kubeconfig(path, server, entry.token, ca_pem, user=entry.user)
        written.append(path)
    return written
