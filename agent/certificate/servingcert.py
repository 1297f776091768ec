"""The daemon endpoint's serving certificate, as a kubelet with `serverTLSBootstrap: true` gets it.

    <state-dir>/pki/kubelet-server.{crt,key} still good for 30 days and naming every wanted address -> kept;
    otherwise a new EC key -> a CSR (CN system:node:<name>, O system:nodes, the node's IPs and DNS names)
    -> POST certificatesigningrequests, signerName kubernetes.io/kubelet-serving, usages digital signature,
    key encipherment, server auth -> status.certificate (kubenode's API server approves and signs a node's
    own request at once; on kube-apiserver an approver must, so the agent polls the CSR for up to
    `wait_s`) -> written 0600.

Raises ServingCertError with one line saying why, so the daemon can say the endpoint is not served.
The key, the CSR and the check of the kept certificate are made by a child process
(agent/certificate/csrtool.py), so the daemon never maps the cryptography package (~10 MiB of RSS).
"""

from __future__ import annotations

import base64
import datetime as dt
import ipaddress
import json
import subprocess
import sys
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kubenode.atomicfile import write_atomically

RENEW_BEFORE = dt.timedelta(days=30)
KUBELET_SERVING = "kubernetes.io/kubelet-serving"
POLL_S = 1.0
TOOL_TIMEOUT_S = 60.0


class ServingCertError(Exception):
    pass


@dataclass(frozen=True)
class ServingCert:
    cert_path: Path
    key_path: Path


def _tool(*args: str) -> dict[str, Any]:
    """Run agent/certificate/csrtool.py in a child process; its JSON answer."""
    try:
        done = subprocess.run(
            [sys.executable, "-m", "agent.certificate.csrtool", *args],
            capture_output=True,
            text=True,
            timeout=TOOL_TIMEOUT_S,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise ServingCertError(f"cannot run the certificate tool: {exc}") from None
    if done.returncode != 0:
        last = (done.stderr.strip().splitlines() or ["no output"])[-1]
        raise ServingCertError(f"the certificate tool failed: {last}")
    answer: dict[str, Any] = json.loads(done.stdout)
    return answer


def ensure_serving_cert(
    client: Any,
    node: str,
    names: Iterable[str],
    state_dir: Path,
    *,
    wait_s: float = 60.0,
    sleep: Callable[[float], None] = time.sleep,
) -> ServingCert:
    from kubenode.kubeclient import KubeError
    from kubenode.kubeclient.client import Resource

    pki = Path(state_dir) / "pki"
    result = ServingCert(pki / "kubelet-server.crt", pki / "kubelet-server.key")
    wanted = {str(ipaddress.ip_address(n)) if _is_ip(n) else n for n in names if n}
    days = str(RENEW_BEFORE.total_seconds() / 86400)
    if result.key_path.exists() and _tool("fresh", str(result.cert_path), days, *sorted(wanted))["fresh"]:
        return result
    made = _tool("request", node, *sorted(wanted))
    resource = Resource(
        "certificatesigningrequests",
        "CertificateSigningRequest",
        group="certificates.k8s.io",
        namespaced=False,
    )
    body = {
        "apiVersion": "certificates.k8s.io/v1",
        "kind": "CertificateSigningRequest",
        "metadata": {"generateName": f"csr-{node}-"},
        "spec": {
            "request": base64.b64encode(made["csr"].encode()).decode(),
            "signerName": KUBELET_SERVING,
            "usages": ["digital signature", "key encipherment", "server auth"],
        },
    }
    try:
        answer = client.create(resource, body)
        deadline = time.monotonic() + wait_s
        while not (answer.get("status") or {}).get("certificate"):
            if time.monotonic() > deadline:
                name = (answer.get("metadata") or {}).get("name", "")
                raise ServingCertError(
                    f"CertificateSigningRequest {name} was not approved within {wait_s:.0f} s"
                )
            sleep(POLL_S)
            answer = client.get(resource, answer["metadata"]["name"])
    except KubeError as exc:
        raise ServingCertError(f"cannot get a serving certificate from the API server: {exc}") from None
    certificate = base64.b64decode(answer["status"]["certificate"])
    pki.mkdir(mode=0o700, parents=True, exist_ok=True)
    write_atomically(result.key_path, made["key"].encode())
    write_atomically(result.cert_path, certificate)
    return result


def _is_ip(name: str) -> bool:
    try:
        ipaddress.ip_address(name)
    except ValueError:
        return False
    return True
