"""`kubenode scheduler extender`: kubenode's device-aware filter, prioritize and bind for kube-scheduler.

Flow:
1. Node and pod informers (the shared client layer, decoded by scheduler.informers) fill
   the ExtenderState; the port opens only once both have synced, so kube-scheduler's
   first call already sees every node and bound pod (nodeCacheCapable works).
2. POST /filter and /prioritize take an ExtenderArgs (Pod plus NodeNames, or full Nodes)
   and answer an ExtenderFilterResult / HostPriorityList (scheduler.extender_api). The
   answer mirrors the request: NodeNames in, NodeNames out; Nodes in, Nodes out.
3. POST /bind takes an ExtenderBindingArgs: the pod (from the last /filter, or the
   informer, or a GET) is assumed on the node at once, then the Binding is POSTed to the
   API server from a thread; a failure forgets it and answers ExtenderBindingResult.Error.
   kube-scheduler records the Scheduled event itself, so the extender records none.
4. A body that is not JSON, or not the type the verb takes, gets 400 {"Error": "..."}; a
   node name the cache lacks is a FailedAndUnresolvableNodes entry, not an error.
GET /healthz answers ok. SIGTERM/SIGINT stop it (exit 0); an address it cannot listen on exits 1.
"""

from __future__ import annotations

import asyncio
import gc
import logging
import signal
import ssl
import sys
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import orjson
from aiohttp import web

from kubenode.kubeclient import NODES, PODS, KubeClient, KubeError
from kubenode.kubeclient.config import ClientConfig
from kubenode.kubeclient.informer import Informer
from kubenode.model.errors import ValidationError
from kubenode.model.objects import Pod
from kubenode.model.parse import parse_pod
from scheduler import extender_api as api
from scheduler.apibinder import post_binding
from scheduler.extender.state import ExtenderState
from scheduler.informers import POD_FIELD_SELECTOR, decode_node, decode_pod
from scheduler.profile import Configuration

log = logging.getLogger(__name__)

PARSED_PODS = 256  # distinct pod bodies kept parsed
MAX_BODY = 64 * 1024 * 1024  # full Nodes of thousands of nodes (nodeCacheCapable: false)
Handler = Callable[[web.Request], Awaitable[web.Response]]


def _json(body: Any, status: int = 200) -> web.Response:
    return web.Response(body=orjson.dumps(body), status=status, content_type="application/json")


def _bad_request(message: str) -> web.Response:
    return _json({api.ERROR: message}, 400)


class Extender:
    """The HTTP handlers over an ExtenderState; `client` binds (None: /bind answers an error)."""

    def __init__(self, state: ExtenderState, client: KubeClient | None, bind_workers: int = 16) -> None:
        self.state = state
        self.client = client
        self._pool = ThreadPoolExecutor(bind_workers, thread_name_prefix="extender-bind")
        self._pods: OrderedDict[bytes, Pod] = OrderedDict()

    def app(self) -> web.Application:
        app = web.Application(client_max_size=MAX_BODY)
        app.router.add_post("/filter", self._guarded(self.filter))
        app.router.add_post("/prioritize", self._guarded(self.prioritize))
        app.router.add_post("/bind", self._guarded(self.bind))
        app.router.add_get("/healthz", self.healthz)
        return app

    def close(self) -> None:
        self._pool.shutdown(wait=True)

    @staticmethod
    def _guarded(handler: Callable[[Mapping[str, Any]], Awaitable[web.Response]]) -> Handler:
        """Decode the JSON object body; malformed input becomes 400 with the reason."""

        async def handle(request: web.Request) -> web.Response:
            try:
                body = api.mapping(orjson.loads(await request.read()), "the request body")
                return await handler(body)
            except orjson.JSONDecodeError as exc:
                return _bad_request(f"the request body is not JSON: {exc}")
            except (api.BadBody, ValidationError) as exc:
                return _bad_request(str(exc))

        return handle

    def _parse_pod(self, raw: Mapping[str, Any]) -> Pod:
        """kube-scheduler sends the same pod to /filter then /prioritize (and again on every
        retry): parse each distinct pod body once."""
        key = orjson.dumps(raw, option=orjson.OPT_SORT_KEYS)
        pod = self._pods.get(key)
        if pod is None:
            pod = parse_pod(raw, "ExtenderArgs.Pod")
            self._pods[key] = pod
            if len(self._pods) > PARSED_PODS:
                self._pods.popitem(last=False)
        else:
            self._pods.move_to_end(key)
        return pod

    def _args(self, body: Mapping[str, Any]) -> tuple[Pod, list[str], list[Mapping[str, Any]] | None]:
        """ExtenderArgs: (pod, node names, the Node objects if they were sent in full)."""
        raw_pod = api.get(body, api.POD)
        if raw_pod is None:
            raise api.BadBody("ExtenderArgs.Pod is missing")
        pod = self._parse_pod(api.mapping(raw_pod, api.POD))
        names = api.get(body, api.NODE_NAMES)
        if names is not None:
            return pod, api.strings(names, api.NODE_NAMES), None
        nodes = api.node_items(body)
        if nodes is None:
            raise api.BadBody("ExtenderArgs needs NodeNames or Nodes")
        return pod, [api.node_name(node) for node in nodes], nodes

    async def filter(self, body: Mapping[str, Any]) -> web.Response:
        pod, names, nodes = self._args(body)
        passed, failed, unresolvable = self.state.filter(pod, names)
        if nodes is None:
            return _json(api.filter_result(passed, None, failed, unresolvable))
        keep = set(passed)
        return _json(
            api.filter_result(None, [n for n in nodes if api.node_name(n) in keep], failed, unresolvable)
        )

    async def prioritize(self, body: Mapping[str, Any]) -> web.Response:
        pod, names, _ = self._args(body)
        return _json(api.host_priorities(self.state.prioritize(pod, names)))

    async def bind(self, body: Mapping[str, Any]) -> web.Response:
        name, namespace = api.get(body, api.POD_NAME), api.get(body, api.POD_NAMESPACE)
        uid, node = api.get(body, api.POD_UID) or "", api.get(body, api.NODE)
        if not all(isinstance(v, str) and v for v in (name, namespace, node)) or not isinstance(uid, str):
            raise api.BadBody("ExtenderBindingArgs needs string PodName, PodNamespace, PodUID and Node")
        return _json(api.binding_result(await self._bind(namespace, name, uid, node)))

    async def _bind(self, namespace: str, name: str, uid: str, node: str) -> str:
        """Assume, then POST the Binding. Returns the error ("" on success)."""
        if self.client is None:
            return "this extender has no API client to bind with"
        client = self.client
        loop = asyncio.get_running_loop()
        pod = self.state.pod_for_binding(namespace, name, uid)
        if pod is None:
            try:
                obj = await loop.run_in_executor(self._pool, lambda: client.get(PODS, name, namespace))
                pod = parse_pod(obj, f"pod {namespace}/{name}")
            except (KubeError, ValidationError) as exc:
                return f"pod {namespace}/{name}: {exc}"
            if uid and pod.uid != uid:
                return f"pod {namespace}/{name} has uid {pod.uid}, not {uid}"
        why = self.state.assume(pod, node)
        if why:
            return why
        try:
            earlier = await loop.run_in_executor(self._pool, post_binding, client, pod, node)
        except KubeError as exc:
            self.state.forget(pod, node)
            return f"binding {pod.key} to {node}: {exc}"
        if earlier is not None and earlier != node:
            self.state.forget(pod, node)
            return f"pod {pod.key} is already assigned to node {earlier!r}"
        self.state.finish(pod)
        log.info("bound %s to %s", pod.key, node)
        return ""

    async def healthz(self, request: web.Request) -> web.Response:
        return web.Response(text="ok")


def settle_heap() -> None:
    """Move what the synced cache holds (every node and pod) out of the garbage collector's
    reach: otherwise each full collection walks all of it in the middle of some request,
    and that request's latency is kube-scheduler's wait."""
    gc.collect()
    gc.freeze()


def server_ssl_context(cert_file: str, key_file: str) -> ssl.SSLContext:
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(cert_file, key_file)
    return context


def informers(client: KubeClient, state: ExtenderState) -> list[Informer[Any]]:
    nodes: Informer[Any] = Informer(
        client,
        NODES,
        decode=decode_node,
        on_add=state.node_changed,
        on_update=lambda old, new: state.node_changed(new),
        on_delete=state.node_deleted,
        name="nodes",
    )
    pods: Informer[Any] = Informer(
        client,
        PODS,
        field_selector=POD_FIELD_SELECTOR,
        decode=decode_pod,
        on_add=state.pod_changed,
        on_update=lambda old, new: state.pod_changed(new),
        on_delete=state.pod_deleted,
        name="pods",
    )
    return [nodes, pods]


async def serve(
    client_config: ClientConfig,
    config: Configuration,
    host: str,
    port: int,
    tls: ssl.SSLContext | None,
    stop: asyncio.Event,
) -> None:
    client = KubeClient(client_config, user_agent="kubenode-scheduler-extender", pool_size=24)
    state = ExtenderState(config)
    watching = informers(client, state)
    extender = Extender(state, client)
    runner: web.AppRunner | None = None
    try:
        for informer in watching:
            informer.start()
        loop = asyncio.get_running_loop()
        for informer in watching:
            while not await loop.run_in_executor(None, informer.wait_for_sync, 1.0):
                if stop.is_set():
                    return
                log.info("waiting for the %s informer to sync", informer.name)
        settle_heap()
        runner = web.AppRunner(extender.app(), access_log=None)
        await runner.setup()
        site = web.TCPSite(runner, host, port, ssl_context=tls)
        await site.start()
        bound = runner.addresses[0][1] if runner.addresses else port
        scheme = "https" if tls else "http"
        # One line on stdout that tests and operators can read the port from.
        print(f"kubenode scheduler extender: serving on {scheme}://{host}:{bound}", flush=True)
        await stop.wait()
    finally:
        if runner is not None:
            await runner.cleanup()
        for informer in watching:
            informer.stop()
        extender.close()
        client.close()


def run_extender(
    client_config: ClientConfig, config: Configuration, host: str, port: int, tls: ssl.SSLContext | None
) -> int:
    async def main() -> None:
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for signum in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(signum, stop.set)
        await serve(client_config, config, host, port, tls, stop)

    try:
        asyncio.run(main())
    except OSError as exc:  # the address is taken or not ours: one line, runtime failure
        print(f"kubenode scheduler: cannot serve on {host}:{port}: {exc}", file=sys.stderr)
        return 1
    return 0
