"""kubeconfig files (client-go's clientcmd v1 Config) that kubectl and the Python client load unchanged."""

from __future__ import annotations

import base64
import contextlib
from pathlib import Path
from typing import Any

import yaml

from apiserver.auth.files import write_private
from kubenode import yamlload

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


def merged(existing: Any, ours: dict[str, Any]) -> dict[str, Any]:
    """`ours` merged into an existing kubeconfig the way `kind` and `minikube` do it: entries of the same name
    are replaced, every other cluster, user and context is kept, and ours becomes the current context."""
    if not isinstance(existing, dict) or existing.get("kind") != "Config":
        return ours
    result = dict(existing)
    for section in ("clusters", "users", "contexts"):
        names = {entry["name"] for entry in ours[section]}
        kept = [
            e for e in existing.get(section) or [] if not (isinstance(e, dict) and e.get("name") in names)
        ]
        result[section] = kept + ours[section]
    result["current-context"] = ours["current-context"]
    return result


def write_kubeconfig(path: Path, server: str, token: str, ca_pem: bytes | None, user: str = "admin") -> None:
    """Write atomically with mode 0600 (it holds a bearer token). An existing kubeconfig there (say
    ~/.kube/config) keeps its other clusters, users and contexts; a file that is not one is replaced."""
    document = kubeconfig_document(server, token, ca_pem, user)
    with contextlib.suppress(OSError, yaml.YAMLError):  # no file yet, or not YAML: ours alone
        document = merged(yamlload.load(path.read_text()), document)
    write_private(path, yaml.safe_dump(document, sort_keys=False).encode())


def write_component_kubeconfigs(
    data_dir: Path, server: str, token_file: Path, ca_pem: bytes | None
) -> list[Path]:
    """Next to the admin kubeconfig, one for the scheduler (`scheduler.kubeconfig`), one for the controller
    manager (`controller-manager.kubeconfig`) and one per node user in
    the token file (`node-<name>.kubeconfig`), so `kubenode scheduler` and `kubenode agent` can be pointed at
    this server at once. Rewritten at every start (the server URL may change)."""
    from apiserver.auth import CONTROLLER_MANAGER_USER, NODE_USER_PREFIX, SCHEDULER_USER
    from apiserver.auth.tokens import parse_token_file

    written: list[Path] = []
    for entry in parse_token_file(token_file.read_text(), str(token_file)):
        if entry.user == SCHEDULER_USER:
            path = data_dir / "scheduler.kubeconfig"
        elif entry.user == CONTROLLER_MANAGER_USER:
            path = data_dir / "controller-manager.kubeconfig"
        elif entry.user.startswith(NODE_USER_PREFIX):
            path = data_dir / f"node-{entry.user[len(NODE_USER_PREFIX) :]}.kubeconfig"
        else:
            continue
        write_kubeconfig(path, server, entry.token, ca_pem, user=entry.user)
        written.append(path)
    return written
