"""certificatesigningrequests (certificates.k8s.io/v1): the kubernetes.io/kubelet-serving signer and an
approver that approves only a node's own names.

How an agent gets its daemon endpoint's serving certificate when it joins, as a kubelet with
`serverTLSBootstrap: true` does: it posts a CSR (subject `system:node:<name>` / `system:nodes`, its DNS and
IP names, usages digital signature, key encipherment, server auth) and polls it for `status.certificate`.

    POST -> the body's spec (request PEM, signerName, usages) checked as kube's kubelet-serving signer checks
    them (ValidateKubeletServingCSR) -> the requester must be that node (user system:node:<name> in
    system:nodes) -> stored (spec.username/uid/groups the requester's) -> 201.
    The approver (`node_own_names`): every DNS name and IP address asked for is the node's own (its name, or
    an address in its Node's status.addresses, or a loopback IP) and none is one of the API server's names
    (kubernetes, kubernetes.default[.svc[.<domain>]], localhost) -> condition Approved (AutoApproved) and
    signed by the cluster CA in the same write; otherwise the CSR stays pending, and `approve_pending`
    looks again each second (the agent posts before its Node reports addresses) until an admin answers.
    PUT .../{name}/approval (`kubectl certificate approve|deny`) -> the user needs `approve` on
    certificates.k8s.io signers/<signerName> as kube's CertificateApproval admission asks (403 with kube's
    text) -> the conditions are stored; an Approved kubelet-serving CSR is signed at once (kube-controller-
    manager's signer; this server holds the CA key).

kube approves no kubelet-serving CSR by itself (its sarapprove approver handles client certificates only):
the auto-approval of a node's own names is kubenode's, and never covers a name the node does not own.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import ipaddress
import uuid
from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

import orjson
from aiohttp import web
from cryptography import x509
from cryptography.x509.oid import NameOID

from apiserver.auth import NODE_USER_PREFIX, NODES_GROUP, UserInfo, node_name_of
from apiserver.auth.reviews import body_of, reply
from apiserver.request import RequestInfo
from apiserver.resources import ResourceInfo
from apiserver.status import api_error

CSR_PATH = "/apis/certificates.k8s.io/v1/certificatesigningrequests"
CSRS = "certificatesigningrequests"
KUBELET_SERVING = "kubernetes.io/kubelet-serving"
ALLOWED_USAGES = {"digital signature", "key encipherment", "server auth"}
SIGNER_KEY = "kubelet_serving_signer"  # ctx.extras: (CSR) -> certificate PEM, set by the daemon
APPROVE_EVERY_S = 1.0
# The API server's own names: a node's serving certificate never names them.
API_SERVER_NAMES = ("kubernetes", "kubernetes.default", "kubernetes.default.svc", "localhost")
API_SERVER_SUFFIX = "kubernetes.default.svc."

Signer = Callable[[x509.CertificateSigningRequest], bytes]


def check_request(spec: dict[str, Any], user: UserInfo) -> tuple[x509.CertificateSigningRequest | None, str]:
    """The parsed CSR, or None and why it is refused (kube's kubelet-serving validation)."""
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


def requested_names(csr: x509.CertificateSigningRequest) -> tuple[list[str], list[str]]:
    """The DNS names and IP addresses (normalized) a CSR asks for."""
    try:
        san = csr.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    except x509.ExtensionNotFound:
        return [], []
    return list(san.get_values_for_type(x509.DNSName)), [
        str(i) for i in san.get_values_for_type(x509.IPAddress)
    ]


def _normal(address: str) -> str:
    try:
        return str(ipaddress.ip_address(address))
    except ValueError:
        return address.lower().rstrip(".")


def foreign_names(
    node: str, node_obj: Mapping[str, Any] | None, dns: Iterable[str], ips: Iterable[str]
) -> list[str]:
    """What a node's CSR asks for that is not the node's own: every name when its Node is not there;
    otherwise the names neither the Node's name nor one of its status.addresses, and any API server name.
    A loopback IP (127.0.0.0/8, ::1) is every host's own, the node's too: the agent asks for 127.0.0.1
    beside its InternalIP (agent/server/secure.py); a client on another host never reaches the node by it
    (docs/security.md: what that leaves on a one-host cluster)."""
    addresses = (node_obj or {}).get("status", {}).get("addresses") or []
    own = {_normal(str(a.get("address", ""))) for a in addresses if isinstance(a, Mapping)}
    own.add(node.lower())
    foreign = []
    for name in dns:
        wanted = _normal(name)
        if wanted in API_SERVER_NAMES or wanted.startswith(API_SERVER_SUFFIX) or wanted not in own:
            foreign.append(name)
    foreign += [ip for ip in ips if _normal(ip) not in own and not ipaddress.ip_address(ip).is_loopback]
    return foreign if node_obj is not None else [*dns, *ips]


def _now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _condition(kind: str, reason: str, message: str) -> dict[str, Any]:
    now = _now()
    return {"type": kind, "status": "True", "reason": reason, "message": message,
            "lastUpdateTime": now, "lastTransitionTime": now}  # fmt: skip


def _load_csr(obj: Mapping[str, Any]) -> x509.CertificateSigningRequest | None:
    try:
        return x509.load_pem_x509_csr(base64.b64decode(str(obj["spec"]["request"])))
    except (KeyError, TypeError, ValueError):
        return None


def _auto_approve(ctx: Any, obj: dict[str, Any]) -> bool:
    """Approve and sign `obj` (a pending kubelet-serving CSR from a node) when all it names is the node's."""
    spec = obj.get("spec") or {}
    user = UserInfo(str(spec.get("username", "")), "", tuple(spec.get("groups") or ()))
    node = node_name_of(user)
    signer: Signer | None = ctx.extras.get(SIGNER_KEY)
    csr = _load_csr(obj)
    if node is None or signer is None or csr is None or spec.get("signerName") != KUBELET_SERVING:
        return False
    entry = ctx.store.latest("nodes", "", node)
    node_obj = orjson.loads(entry.data) if entry is not None else None
    if foreign_names(node, node_obj, *requested_names(csr)):
        return False
    status = obj.setdefault("status", {})
    status["conditions"] = [
        *(status.get("conditions") or []),
        _condition("Approved", "AutoApproved", "kubenode apiserver: the node's own names and addresses"),
    ]
    status["certificate"] = base64.b64encode(signer(csr)).decode()
    return True


def _pending(obj: Mapping[str, Any]) -> bool:
    status = obj.get("status") or {}
    return not status.get("conditions") and not status.get("certificate")


async def approve_pending(ctx: Any) -> None:
    """The approver: a pending kubelet-serving CSR of a node is approved once its names are the node's."""
    from apiserver.storage.cache import Filter

    for entry in list(ctx.store.cache.entries(CSRS, Filter())):
        obj = orjson.loads(entry.data)
        spec = obj.get("spec") or {}
        username = str(spec.get("username", ""))
        if (
            not _pending(obj)
            or not username.startswith(NODE_USER_PREFIX)
            or NODES_GROUP not in (spec.get("groups") or ())
        ):
            continue
        latest = ctx.store.latest(CSRS, "", entry.name)
        if latest is None or latest.rev != entry.rev:
            continue  # changed meanwhile: the next pass sees it
        if _auto_approve(ctx, obj):
            await ctx.store.write(CSRS, "", entry.name, obj, "MODIFIED")


def _may_approve(request: web.Request, user: UserInfo, signer_name: str) -> bool:
    """kube's CertificateApproval admission: `approve` on signers/<signerName> or signers/<domain>/*."""
    from apiserver.handlers.app import AUTHORIZER

    authorizer = request.app.get(AUTHORIZER)
    if authorizer is None:
        return True
    names = [signer_name]
    if "/" in signer_name:
        names.append(signer_name.split("/", 1)[0] + "/*")
    for name in names:
        info = RequestInfo(True, "", "approve", "certificates.k8s.io", "*", "", "signers", "", name)
        if authorizer.authorize(user, info).allowed:
            return True
    return False


def add_routes(app: web.Application, resources: Sequence[ResourceInfo]) -> None:
    async def create(request: web.Request) -> web.Response:
        from apiserver.handlers.common import CONTEXT

        ctx = request.app[CONTEXT]
        user: UserInfo | None = request.get("user")
        body = await body_of(request)
        spec = (body or {}).get("spec")
        if user is None or not isinstance(spec, dict):
            return reply(api_error(400, "BadRequest", "a CertificateSigningRequest needs a spec"), 400)
        csr, problem = check_request(spec, user)
        signer: Signer | None = ctx.extras.get(SIGNER_KEY)
        if csr is None or signer is None:
            return reply(
                api_error(403, "Forbidden", problem or "this server has no CA key to sign with"), 403
            )
        meta = dict((body or {}).get("metadata") or {})
        meta.setdefault("name", f"{meta.pop('generateName', 'csr-')}{uuid.uuid4().hex[:5]}")
        name = str(meta["name"])
        if ctx.store.latest(CSRS, "", name) is not None:
            message = f'certificatesigningrequests.certificates.k8s.io "{name}" already exists'
            return reply(api_error(409, "AlreadyExists", message), 409)
        meta.update({"uid": str(uuid.uuid4()), "creationTimestamp": _now()})
        meta.pop("resourceVersion", None)
        spec = {**spec, "username": user.name, "uid": user.uid, "groups": list(user.groups)}
        obj: dict[str, Any] = {"kind": "CertificateSigningRequest", "apiVersion": "certificates.k8s.io/v1",
                               "metadata": meta, "spec": spec, "status": {}}  # fmt: skip
        _auto_approve(ctx, obj)
        entry = await ctx.store.write(CSRS, "", name, obj, "ADDED")
        return reply(orjson.loads(entry.data))

    async def approval(request: web.Request) -> web.Response:
        from apiserver.handlers.common import CONTEXT

        ctx = request.app[CONTEXT]
        user: UserInfo | None = request.get("user")
        name = request.match_info["name"]
        body = await body_of(request)
        entry = ctx.store.latest(CSRS, "", name)
        if entry is None:
            message = f'certificatesigningrequests.certificates.k8s.io "{name}" not found'
            return reply(api_error(404, "NotFound", message), 404)
        if user is None or body is None:
            return reply(api_error(400, "BadRequest", "a CertificateSigningRequest is needed"), 400)
        obj = orjson.loads(entry.data)
        signer_name = str((obj.get("spec") or {}).get("signerName", ""))
        if not _may_approve(request, user, signer_name):
            why = f"user not permitted to approve requests with signerName {signer_name!r}".replace("'", '"')
            message = f'certificatesigningrequests.certificates.k8s.io "{name}" is forbidden: {why}'
            return reply(api_error(403, "Forbidden", message), 403)
        wanted = (body.get("metadata") or {}).get("resourceVersion")
        if wanted and str(wanted) != str(entry.rev):
            message = (
                f'Operation cannot be fulfilled on certificatesigningrequests.certificates.k8s.io "{name}": '
                "the object has been modified; please apply your changes to the latest version and try again"
            )
            return reply(api_error(409, "Conflict", message), 409)
        conditions = [c for c in (body.get("status") or {}).get("conditions") or [] if isinstance(c, dict)]
        kinds = {c.get("type") for c in conditions if c.get("status") == "True"}
        if {"Approved", "Denied"} <= kinds:
            message = (
                f'CertificateSigningRequest.certificates.k8s.io "{name}" is invalid: status.conditions: '
                'Invalid value: "Denied": Approved and Denied conditions are mutually exclusive'
            )
            return reply(api_error(422, "Invalid", message), 422)
        status = obj.setdefault("status", {})
        now = _now()
        for c in conditions:
            c.setdefault("lastUpdateTime", now)
            c.setdefault("lastTransitionTime", now)
        status["conditions"] = conditions
        signer: Signer | None = ctx.extras.get(SIGNER_KEY)
        csr = _load_csr(obj)
        approved = "Approved" in kinds and signer_name == KUBELET_SERVING
        if approved and not status.get("certificate") and signer is not None and csr is not None:
            status["certificate"] = base64.b64encode(signer(csr)).decode()
        stored = await ctx.store.write(CSRS, "", name, obj, "MODIFIED")
        return reply(orjson.loads(stored.data), 200)

    async def start_approver(app: web.Application) -> None:
        from apiserver.handlers.common import CONTEXT

        ctx = app[CONTEXT]

        async def loop() -> None:
            while True:
                await asyncio.sleep(APPROVE_EVERY_S)
                with contextlib.suppress(Exception):
                    await approve_pending(ctx)

        task = asyncio.get_running_loop().create_task(loop())
        app[APPROVER_TASK] = task

    async def stop_approver(app: web.Application) -> None:
        task = app.get(APPROVER_TASK)
        if task is not None:
            task.cancel()

    app.router.add_post(CSR_PATH, create)
    app.router.add_put(CSR_PATH + "/{name}/approval", approval)
    app.on_startup.append(start_approver)
    app.on_cleanup.append(stop_approver)


APPROVER_TASK: web.AppKey[Any] = web.AppKey("csr_approver_task", object)
