"""POST certificatesigningrequests (certificates.k8s.io/v1) for the kubernetes.io/kubelet-serving signer.

How an agent gets its daemon endpoint's serving certificate when it joins, as a kubelet with
`serverTLSBootstrap: true` does: it posts a CSR (subject `system:node:<name>` / `system:nodes`, its DNS and
IP names, usages digital signature, key encipherment, server auth) and reads `status.certificate`.

    POST -> the body's spec (request PEM, signerName, usages) checked as kube's kubelet-serving signer and
    approver check them -> the requester must be that node (user system:node:<name> in system:nodes) ->
    approved (condition Approved, reason AutoApproved) and signed by the cluster CA at once -> 201 with the
    CSR, status.certificate filled.

Limits: kube-apiserver stores a CSR and leaves approval to an approver and signing to
kube-controller-manager; this server does both in the create and stores nothing, so `kubectl get csr`
lists nothing, and only kubelet-serving CSRs from the node they name are accepted (403 otherwise).
On a real cluster the agent's same request waits for `kubectl certificate approve`.
"""

from __future__ import annotations

import base64
import uuid
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from typing import Any

from aiohttp import web
from cryptography import x509
from cryptography.x509.oid import NameOID

from apiserver.auth import UserInfo, node_name_of
from apiserver.auth.reviews import body_of, reply
from apiserver.resources import ResourceInfo
from apiserver.status import api_error

CSR_PATH = "/apis/certificates.k8s.io/v1/certificatesigningrequests"
KUBELET_SERVING = "kubernetes.io/kubelet-serving"
ALLOWED_USAGES = {"digital signature", "key encipherment", "server auth"}
SIGNER_KEY = "kubelet_serving_signer"  # ctx.extras: (CSR) -> certificate PEM, set by the daemon

Signer = Callable[[x509.CertificateSigningRequest], bytes]


def check_request(spec: dict[str, Any], user: UserInfo) -> tuple[x509.CertificateSigningRequest | None, str]:
    """The parsed CSR, or None and why it is refused (kube's kubelet-serving validation and approval)."""
    if spec.get("signerName") != KUBELET_SERVING:
        return None, f"spec.signerName: only {KUBELET_SERVING} is served, got {spec.get('signerName')!r}"
    node = node_name_of(user)
    if node is None:
        return None, f"user {user.name!r} is not a node: only a node may ask for its serving certificate"
    try:
        pem = base64.b64decode(str(spec.get("request", "")), validate=True)
        csr = x509.load_pem_x509_csr(pem)
    except ValueError:
        return None, "spec.request: not a base64 PEM CERTIFICATE REQUEST"
    if not csr.is_signature_valid:
        return None, "spec.request: the CSR's signature does not match its key"
    usages = set(spec.get("usages") or [])
    if "server auth" not in usages or not usages <= ALLOWED_USAGES:
        return (
            None,
            f"spec.usages: server auth with digital signature or key encipherment, got {sorted(usages)}",
        )
    names = [a.value for a in csr.subject.get_attributes_for_oid(NameOID.COMMON_NAME)]
    orgs = [a.value for a in csr.subject.get_attributes_for_oid(NameOID.ORGANIZATION_NAME)]
    if names != [user.name] or orgs != ["system:nodes"]:
        return None, f"spec.request: subject must be CN={user.name}, O=system:nodes"
    try:
        san = csr.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    except x509.ExtensionNotFound:
        return None, "spec.request: names no DNS name or IP address"
    if len(san) != len(san.get_values_for_type(x509.DNSName)) + len(san.get_values_for_type(x509.IPAddress)):
        return None, "spec.request: only DNS names and IP addresses may be asked for"
    return csr, ""


def add_routes(app: web.Application, resources: Sequence[ResourceInfo]) -> None:
    async def create(request: web.Request) -> web.Response:
        from apiserver.handlers.common import CONTEXT

        user: UserInfo | None = request.get("user")
        body = await body_of(request)
        spec = (body or {}).get("spec")
        if user is None or not isinstance(spec, dict):
            return reply(api_error(400, "BadRequest", "a CertificateSigningRequest needs a spec"), 400)
        csr, problem = check_request(spec, user)
        signer: Signer | None = request.app[CONTEXT].extras.get(SIGNER_KEY)
        if csr is None or signer is None:
            return reply(
                api_error(403, "Forbidden", problem or "this server has no CA key to sign with"), 403
            )
        now = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        meta = dict((body or {}).get("metadata") or {})
        meta.setdefault("name", f"{meta.pop('generateName', 'csr-')}{uuid.uuid4().hex[:5]}")
        meta.update({"uid": str(uuid.uuid4()), "creationTimestamp": now, "resourceVersion": "0"})
        spec = {**spec, "username": user.name, "uid": user.uid, "groups": list(user.groups)}
        condition = {"type": "Approved", "status": "True", "reason": "AutoApproved",
                     "message": "kubenode apiserver: a node's own serving certificate",
                     "lastUpdateTime": now, "lastTransitionTime": now}  # fmt: skip
        certificate = base64.b64encode(signer(csr)).decode()
        return reply({"kind": "CertificateSigningRequest", "apiVersion": "certificates.k8s.io/v1",
                      "metadata": meta, "spec": spec,
                      "status": {"conditions": [condition], "certificate": certificate}})  # fmt: skip

    app.router.add_post(CSR_PATH, create)
