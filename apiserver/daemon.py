"""Start-up and shutdown of `kubenode apiserver`.

Flow: take the data dir's lock (a second process on it is refused, naming the holder), load
the token file (created with the bootstrap users on first start), make the CA and serving
certificate (always TLS: kubectl sends tokens only over TLS), replay the SQLite log into
the watch cache, start the writer process, create the default namespaces, listen, create (or
re-point) the `default/kubernetes` Service at the port, write the admin kubeconfig, print
`serving on <url>`, sd_notify READY; on SIGTERM/SIGINT stop listening, end the watches and
close the database.
"""

from __future__ import annotations

import asyncio
import datetime
import fcntl
import functools
import gc
import logging
import os
import signal
import ssl
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson
from aiohttp import web

from apiserver.handlers import tokenrequest
from apiserver.handlers.app import build_app, fast_handle
from apiserver.handlers.common import ApiContext
from apiserver.handlers.fasthttp import FastServer
from apiserver.handlers.httperrors import StatusRunner
from apiserver.registry import build_strategies, utc_now
from apiserver.registry.kinds import event_last_seen
from apiserver.registry.services import KUBERNETES_SERVICE, ServiceStrategy, kubernetes_service
from apiserver.storage.cache import Filter
from apiserver.storage.store import Store
from kubenode import sdnotify

log = logging.getLogger(__name__)

DEFAULT_NAMESPACES = ("default", "kube-system", "kube-public", "kube-node-lease")
DB_NAME = "state.db"
LOCK_NAME = "apiserver.lock"


class StartupError(Exception):
    """A problem that stops the server before it serves (exit status 1), said in one line."""


@dataclass
class Options:
    data_dir: Path
    bind_address: str = "127.0.0.1"
    port: int = 6443
    token_auth_file: Path | None = None
    write_kubeconfig: Path | None = None
    authorization_mode: str = "Node,RBAC"
    authorization_policy_file: Path | None = None  # RBAC objects to enforce (apiserver/auth/policyfile.py)
    admission_config_file: Path | None = (
        None  # kube's AdmissionConfiguration (PodSecurity defaults, exemptions)
    )
    watch_cache_size: int = 10000
    bookmark_interval: float = 60.0
    event_ttl: float = 3600.0
    service_account_issuer: str = ""  # --service-account-issuer; "" is kubeadm's (auth/satokens.py)


def lock_data_dir(data_dir: Path) -> int:
    """An exclusive flock on <data_dir>/apiserver.lock, held for the life of the process."""
    data_dir.mkdir(parents=True, exist_ok=True)
    fd = os.open(data_dir / LOCK_NAME, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        holder = os.pread(fd, 100, 0).decode(errors="replace").strip() or "another process"
        os.close(fd)
        raise StartupError(
            f"data dir {data_dir} is in use by {holder} (one apiserver per data dir)"
        ) from None
    os.ftruncate(fd, 0)
    os.pwrite(fd, f"kubenode apiserver pid {os.getpid()}\n".encode(), 0)
    return fd


def _url(host: str, port: int, tls: bool) -> str:
    shown = f"[{host}]" if ":" in host else host
    if host in ("0.0.0.0", "::"):
        shown = "127.0.0.1"
    return f"{'https' if tls else 'http'}://{shown}:{port}"


async def _ensure_namespaces(ctx: ApiContext) -> None:
    strategy = ctx.strategies["namespaces"]
    for name in DEFAULT_NAMESPACES:
        if ctx.store.latest("namespaces", "", name) is None:
            obj: dict[str, Any] = {"kind": "Namespace", "apiVersion": "v1", "metadata": {"name": name}}
            strategy.new_metadata(obj, "")
            strategy.prepare_create(obj)
            await ctx.store.write("namespaces", "", name, obj, "ADDED")


async def _ensure_kubernetes_service(ctx: ApiContext, port: int) -> None:
    """default/kubernetes, pointing at this server's port (kube's controlplane controller keeps it so)."""
    strategy = ctx.strategies["services"]
    assert isinstance(strategy, ServiceStrategy)
    wanted = kubernetes_service(strategy, port)
    current = ctx.store.latest("services", "default", KUBERNETES_SERVICE)
    if current is None:
        strategy.new_metadata(wanted, "default")
        strategy.prepare_create(wanted)
        await ctx.store.write("services", "default", KUBERNETES_SERVICE, wanted, "ADDED")
        return
    obj = orjson.loads(current.data)
    if obj.get("spec", {}).get("ports") != wanted["spec"]["ports"]:
        obj.setdefault("spec", {})["ports"] = wanted["spec"]["ports"]
        await ctx.store.write("services", "default", KUBERNETES_SERVICE, obj, "MODIFIED")


def _report_objects(ctx: ApiContext) -> None:
    try:
        from apiserver.metrics import set_storage_objects
    except Exception:
        return
    for plural in ctx.strategies:
        set_storage_objects(plural, ctx.store.cache.count(plural))


async def _metrics_loop(ctx: ApiContext) -> None:
    while True:
        _report_objects(ctx)
        await asyncio.sleep(10)


async def _expire_events(ctx: ApiContext, ttl: float) -> None:
    """kube-apiserver's --event-ttl: events go this long after they last happened (etcd leases there)."""
    while True:
        await asyncio.sleep(min(60.0, max(ttl / 4, 0.5)))
        cutoff = ctx.clock() - datetime.timedelta(seconds=ttl)
        for entry in list(ctx.store.cache.entries("events", Filter())):
            obj = orjson.loads(entry.data)
            seen = event_last_seen(obj)
            current = ctx.store.latest("events", entry.namespace, entry.name)
            if seen is not None and seen < cutoff and current is not None and current.rev == entry.rev:
                await ctx.store.write("events", entry.namespace, entry.name, obj, "DELETED")


def _private_file(path: Path) -> None:
    """The file, made (empty: SQLite takes it as a new database) or kept, readable by its owner only."""
    os.close(os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600))
    os.chmod(path, 0o600)


def _pod_security_config(path: Path | None) -> Any:
    from apiserver.admission.podsecurity.config import Config, load

    if path is None:
        return Config()
    try:
        return load(path)
    except ValueError as exc:
        raise StartupError(f"--admission-control-config-file: {exc}") from None


def _pod_security(config: Any, store: Store) -> Any:
    """The PodSecurity plugin, reading namespaces and pods from the watch cache."""
    from apiserver.admission.podsecurity.admission import PodSecurity

    def namespace_labels(name: str) -> Any:
        entry = store.latest("namespaces", "", name)
        return entry.labels if entry is not None else None  # kept decoded by the cache: no JSON parse per pod

    def pods(namespace: str) -> list[Any]:
        return [orjson.loads(e.data) for e in store.cache.entries("pods", Filter(namespace))]

    return PodSecurity(config, namespace_labels, pods)


def _service_accounts(ctx: ApiContext, data_dir: Path, issuer_url: str, static: Any) -> Any:
    """Bound ServiceAccount tokens: the signing key with the PKI, the TokenRequest issuer, the admission
    plugin that mounts them, and the authenticator that takes them before the static tokens."""
    from apiserver.admission.serviceaccount import ServiceAccountAdmission
    from apiserver.auth.saauthn import ServiceAccountAuthenticator, store_lookup
    from apiserver.auth.satokens import DEFAULT_ISSUER, TokenIssuer, ensure_signing_key

    try:
        issuer = TokenIssuer(ensure_signing_key(data_dir), issuer_url or DEFAULT_ISSUER)
    except (OSError, ValueError) as exc:
        raise StartupError(f"service-account signing key: {exc}") from None
    ctx.extras[tokenrequest.ISSUER_KEY] = issuer
    lookup = store_lookup(ctx.store)
    ctx.mutators.append(ServiceAccountAdmission(lambda ns, name: lookup("serviceaccounts", ns, name)))
    ctx.mutators.append(_priority_admission(ctx.store))
    return ServiceAccountAuthenticator(issuer, lookup, static, ctx.clock)


def _priority_admission(store: Store) -> Any:
    """kube's Priority admission, reading PriorityClasses from the watch cache."""
    from apiserver.admission.priority import PriorityAdmission

    def lookup(name: str) -> Any:
        entry = store.latest("priorityclasses", "", name)
        return orjson.loads(entry.data) if entry is not None else None

    def classes() -> list[Any]:  # only the global defaults matter to it: the others are not parsed
        entries = store.cache.entries("priorityclasses", Filter())
        return [orjson.loads(e.data) for e in entries if b'"globalDefault":true' in e.data]

    return PriorityAdmission(lookup, classes)


async def _ensure_priority_classes(ctx: ApiContext) -> None:
    """system-node-critical and system-cluster-critical, as kube-apiserver's scheduling PostStartHook makes
    them."""
    from apiserver.admission.priority import system_priority_classes

    strategy = ctx.strategies["priorityclasses"]
    for obj in system_priority_classes():
        name = obj["metadata"]["name"]
        if ctx.store.latest("priorityclasses", "", name) is None:
            strategy.new_metadata(obj, "")
            strategy.prepare_create(obj)
            await ctx.store.write("priorityclasses", "", name, obj, "ADDED")


LEGACY_TOKEN_TRACKING = "kube-apiserver-legacy-service-account-token-tracking"


async def _ensure_legacy_token_tracking(ctx: ApiContext) -> None:
    """kube-system's ConfigMap of the day legacy ServiceAccount token use began to be tracked
    (kube-apiserver's legacytokentracking controller; kube-controller-manager's
    legacy-serviceaccount-token-cleaner reads it)."""
    if ctx.store.latest("configmaps", "kube-system", LEGACY_TOKEN_TRACKING) is not None:
        return
    strategy = ctx.strategies["configmaps"]
    since = ctx.clock().astimezone(datetime.UTC).strftime("%Y-%m-%d")
    obj: dict[str, Any] = {
        "kind": "ConfigMap", "apiVersion": "v1",
        "metadata": {"name": LEGACY_TOKEN_TRACKING, "namespace": "kube-system"}, "data": {"since": since},
    }  # fmt: skip
    strategy.new_metadata(obj, "kube-system")
    strategy.prepare_create(obj)
    await ctx.store.write("configmaps", "kube-system", LEGACY_TOKEN_TRACKING, obj, "ADDED")


async def serve(options: Options) -> None:
    from apiserver.auth import ADMIN_USER
    from apiserver.auth.authn import TokenAuthenticator
    from apiserver.auth.authz import new_authorizer
    from apiserver.auth.kubeconfig import write_component_kubeconfigs, write_kubeconfig
    from apiserver.auth.noderestriction import admit
    from apiserver.auth.pki import ensure_serving_cert
    from apiserver.auth.tokens import ensure_token_file, token_for

    data_dir = options.data_dir
    token_file = options.token_auth_file or ensure_token_file(data_dir)
    try:
        authenticator = TokenAuthenticator.from_file(token_file)
    except (OSError, ValueError) as exc:
        raise StartupError(f"--token-auth-file {token_file}: {exc}") from None
    try:
        authorizer = new_authorizer(options.authorization_mode, options.authorization_policy_file)
    except ValueError as exc:
        raise StartupError(str(exc)) from None
    pod_security = _pod_security_config(options.admission_config_file)
    # TLS even on loopback: kubectl (clientcmd) sends a kubeconfig's bearer token only over TLS
    # (kubernetes/kubectl#744), so a plain-HTTP server could never see kubectl's credentials.
    cert = ensure_serving_cert(data_dir, [options.bind_address])
    ssl_context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ssl_context.load_cert_chain(cert.cert_path, cert.key_path)
    ca_pem = cert.ca_pem
    tls = True

    clock = utc_now
    strategies = build_strategies(clock)
    _private_file(data_dir / DB_NAME)  # Secrets live in it; SQLite gives its -wal and -shm the same mode
    store = Store(data_dir / DB_NAME, {p: s.index for p, s in strategies.items()}, options.watch_cache_size)
    store.load()
    services = strategies["services"]
    if isinstance(services, ServiceStrategy):  # allocation reads the stored Services' IPs and NodePorts
        services.allocated = lambda: (e.fields for e in store.cache.entries("services", Filter()))
    # The loaded objects live until deleted: keep them out of the cyclic GC's full passes, and run those
    # passes less often, so a collection of a big heap does not stall watch delivery.
    gc.collect()
    gc.freeze()
    gc.set_threshold(50_000, 20, 100)
    loop = asyncio.get_running_loop()
    store.start(loop)
    from apiserver.auth.authz import NodeRBACAuthorizer
    from apiserver.auth.nodegraph import NodeGraph
    from apiserver.auth.rbacstore import StoredPolicy

    if isinstance(authorizer, NodeRBACAuthorizer):
        authorizer.graph = NodeGraph(store.cache)  # nodes read the Secrets/ConfigMaps of their pods only
        authorizer.stored = StoredPolicy(store.cache)  # the Roles and bindings created through the API
    ctx = ApiContext(store, strategies, clock, admit=admit, bookmark_interval=options.bookmark_interval)
    ctx.validators.append(_pod_security(pod_security, store))
    if isinstance(authorizer, NodeRBACAuthorizer) and authorizer.stored is not None:
        from apiserver.admission.rbacescalation import EscalationCheck

        ctx.validators.append(EscalationCheck(authorizer, authorizer.stored.role_rules))
    authenticator = _service_accounts(ctx, data_dir, options.service_account_issuer, authenticator)
    # pods/log, exec, attach and portforward reach the agents over TLS with this server's kubelet client
    # certificate; nodes get their serving certificates from kubelet-serving CSRs signed by the same CA.
    from apiserver.auth.certificates import SIGNER_KEY
    from apiserver.auth.pki import ensure_kubelet_client_cert, sign_kubelet_serving
    from apiserver.handlers.nodeproxy import DIALER_KEY, NodeDialer

    ctx.extras[DIALER_KEY] = NodeDialer(ensure_kubelet_client_cert(data_dir))
    ctx.extras[SIGNER_KEY] = functools.partial(sign_kubelet_serving, data_dir)
    runner: web.AppRunner | None = None
    try:
        await _ensure_namespaces(ctx)
        await _ensure_priority_classes(ctx)
        await _ensure_legacy_token_tracking(ctx)
        if isinstance(authorizer, NodeRBACAuthorizer):
            from apiserver.auth.bootstrap import bootstrap_objects, ensure_bootstrap_policy

            await ensure_bootstrap_policy(ctx.store, ctx.strategies, bootstrap_objects())
        app = build_app(ctx, authenticator, authorizer)
        tokenrequest.add_routes(app, authenticator.issuer)
        runner = StatusRunner(app, access_log=None, shutdown_timeout=2.0, handle_signals=False)
        await runner.setup()
        assert runner.server is not None
        # Connections are served by handlers/fasthttp.py, which hands all but the unary REST verbs to
        # aiohttp's handler (runner.server): the listening socket is ours, not a web.TCPSite.
        fast = FastServer(app, runner.server, fast_handle)
        try:
            listener = await loop.create_server(
                fast, options.bind_address, options.port, ssl=ssl_context, backlog=1024, reuse_address=True
            )
        except OSError as exc:
            raise StartupError(
                f"cannot listen on {options.bind_address}:{options.port}: {exc.strerror}"
            ) from None
        port = listener.sockets[0].getsockname()[1]
        await _ensure_kubernetes_service(ctx, port)
        url = _url(options.bind_address, port, tls)
        kubeconfig = options.write_kubeconfig or data_dir / "admin.kubeconfig"
        token = token_for(token_file, ADMIN_USER)
        if token is not None:
            write_kubeconfig(kubeconfig, url, token, ca_pem)
        write_component_kubeconfigs(data_dir, url, token_file, ca_pem)  # scheduler, node: next to the admin's
        print(f"kubenode apiserver: serving on {url} (kubeconfig {kubeconfig})", flush=True)
        sdnotify.ready(f"serving on {url}")
        metrics_task = asyncio.create_task(_metrics_loop(ctx))
        events_task = asyncio.create_task(_expire_events(ctx, options.event_ttl))
        stop = asyncio.Event()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, stop.set)
        await stop.wait()
        sdnotify.notify("STOPPING=1")
        metrics_task.cancel()
        events_task.cancel()
        store.cache.close_all()
        listener.close()
        fast.close()
    finally:
        if runner is not None:
            await runner.cleanup()
        store.close()  # the writer commits what it was sent, then exits


def event_loop_factory() -> Callable[[], asyncio.AbstractEventLoop] | None:
    """uvloop's event loop where it is installed (a dependency; libuv's loop costs the server
    less per request than asyncio's own), else asyncio's default (None)."""
    try:
        import uvloop
    except ImportError:
        return None
    return uvloop.new_event_loop


def run(options: Options) -> int:
    try:
        fd = lock_data_dir(options.data_dir)
    except StartupError as exc:
        print(f"kubenode apiserver: {exc}", file=sys.stderr)
        return 1
    except OSError as exc:
        print(f"kubenode apiserver: --data-dir {options.data_dir}: {exc.strerror or exc}", file=sys.stderr)
        return 1
    try:
        with asyncio.Runner(loop_factory=event_loop_factory()) as runner:
            runner.run(serve(options))
    except StartupError as exc:
        print(f"kubenode apiserver: {exc}", file=sys.stderr)
        return 1
    finally:
        os.close(fd)
    return 0
