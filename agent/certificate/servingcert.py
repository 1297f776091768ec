"""The daemon endpoint's serving certificate, as a kubelet with `serverTLSBootstrap: true` gets it.

    <state-dir>/pki/kubelet-server.{crt,key} still good for 30 days and naming every wanted address -> kept;
    otherwise a new EC key -> a CSR (CN system:node:<name>, O system:nodes, the node's IPs and DNS names)
    -> POST certificatesigningrequests, signerName kubernetes.io/kubelet-serving, usages digital signature,
    key encipherment, server auth -> status.certificate (kubenode's API server approves and signs a node's
    own request at once; on kube-apiserver an approver must, so the agent polls the CSR for up to
    `wait_s`) -> written 0600.

Raises ServingCertError with one line saying why, so the daemon can say the endpoint is not served.
"""

from __future__ import annotations

import base64
import datetime as dt
import ipaddress
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from kubenode.atomicfile import write_atomically

RENEW_BEFORE = dt.timedelta(days=30)
KUBELET_SERVING = "kubernetes.io/kubelet-serving"
POLL_S = 1.0


class ServingCertError(Exception):
    pass


@dataclass(frozen=True)
class ServingCert:
    cert_path: Path
    key_path: Path


def _general_name(name: str) -> x509.GeneralName:
    try:
        return x509.IPAddress(ipaddress.ip_address(name))
    except ValueError:
        return x509.DNSName(name)


def _is_fresh(path: Path, names: set[str]) -> bool:
    try:
        cert = x509.load_pem_x509_certificate(path.read_bytes())
        san = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    except (OSError, ValueError, x509.ExtensionNotFound):
        return False
    have = {str(v) for v in san.get_values_for_type(x509.IPAddress)} | set(
        san.get_values_for_type(x509.DNSName)
    )
    return cert.not_valid_after_utc - dt.datetime.now(dt.UTC) >= RENEW_BEFORE and names <= have


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
    if result.key_path.exists() and _is_fresh(result.cert_path, wanted):
        return result
    key = ec.generate_private_key(ec.SECP256R1())
    subject = x509.Name(
        [
            x509.NameAttribute(NameOID.ORGANIZATION_NAME, "system:nodes"),
            x509.NameAttribute(NameOID.COMMON_NAME, f"system:node:{node}"),
        ]
    )
    csr = (
        x509.CertificateSigningRequestBuilder()
        .subject_name(subject)
        .add_extension(
            x509.SubjectAlternativeName([_general_name(n) for n in sorted(wanted)]), critical=False
        )
        .sign(key, hashes.SHA256())
    )
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
            "request": base64.b64encode(csr.public_bytes(serialization.Encoding.PEM)).decode(),
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
    key_pem = key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )
    write_atomically(result.key_path, key_pem)
    write_atomically(result.cert_path, certificate)
    return result


def _is_ip(name: str) -> bool:
    try:
        ipaddress.ip_address(name)
    except ValueError:
        return False
    return True
