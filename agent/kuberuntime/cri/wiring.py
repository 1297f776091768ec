"""`with_cri_runtime`: the agent's runtime becomes the selector over its process runtime and a CRI runtime.

Asks the runtime's version once: an endpoint that is not there (or speaks another CRI version) is one clear
error line, and the agent keeps serving process pods; CRI pods show the error in their status and start when
the runtime answers (the client connects again on every sync until then).
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import logging
from typing import TYPE_CHECKING, Any

from agent.apis.config import AgentConfig
from agent.kuberuntime.cri.client import CRIError
from agent.kuberuntime.cri.runtime import CRIRuntime
from agent.kuberuntime.cri.security import container_security
from agent.kuberuntime.runtime import ProcessRuntime
from agent.kuberuntime.selector import RuntimeSelector

if TYPE_CHECKING:
    from agent.node import NodeAgent

log = logging.getLogger(__name__)


def with_cri_runtime(agent: NodeAgent, config: AgentConfig) -> RuntimeSelector:
    process = agent.runtime
    assert isinstance(process, ProcessRuntime)
    cri = CRIRuntime(
        config.container_runtime_endpoint,
        agent.store,
        agent.host,
        node=config.node_name,
        log_root=config.pod_logs_dir,
        backoff=process.backoff,
        pre_start=agent.cm.pre_start,
        security=functools.partial(container_security, policy=process.security),
        objects=lambda: process.objects,
    )
    try:
        version = cri.version()
        log.info(
            "container runtime %s %s (CRI %s) at %s",
            version.runtime_name,
            version.runtime_version,
            version.runtime_api_version,
            config.container_runtime_endpoint,
        )
    except CRIError as exc:
        log.error("%s; pods with images wait for it, process pods run", exc)
    return RuntimeSelector(process, cri)


def join_cluster(runtime: object, cluster: Any) -> None:
    """RuntimeClasses from the API server; the Node's containerRuntimeVersion and status.images."""
    from kubenode.kubeclient import NotFound
    from kubenode.kubeclient.client import Resource

    runtimeclasses = Resource("runtimeclasses", "RuntimeClass", group="node.k8s.io", namespaced=False)

    assert isinstance(runtime, RuntimeSelector)
    client = cluster.client

    def handler_of(name: str) -> str:
        try:
            runtime_class = client.get(runtimeclasses, name)
        except NotFound:
            raise LookupError("not found") from None
        return str(runtime_class.get("handler") or "")

    runtime.handler_of = handler_of
    reporter = cluster.reporter
    try:
        version = runtime.cri.version()
        info = {**reporter.facts.node_info}
        info["containerRuntimeVersion"] = f"{version.runtime_name}://{version.runtime_version}"
        reporter.facts = dataclasses.replace(reporter.facts, node_info=info)
    except CRIError:
        pass  # the runtime is not there yet: the agent's own version stays
    last: list[dict[str, Any]] = []

    def images() -> list[dict[str, Any]]:
        nonlocal last
        with contextlib.suppress(CRIError, RuntimeError):  # the runtime is away: the last list stands
            last = runtime.cri.node_images()
        return last

    reporter.images = images
