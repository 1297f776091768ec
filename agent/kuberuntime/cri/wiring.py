"""`cri_selector`: the CRI runtime beside the process runtime, and the selector over both (called by
agent/composition.py while it assembles the agent); `runtime_class_handlers`: RuntimeClasses from the API
server.

Asks the runtime's version once: an endpoint that is not there (or speaks another CRI version) is one clear
error line, and the agent keeps serving process pods; CRI pods show the error in their status and start when
the runtime answers (the client connects again on every sync until then).
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import logging
from collections.abc import Callable
from typing import Any

from agent.apis.config import AgentConfig
from agent.container.resources import ContainerResources
from agent.kuberuntime.cri.client import CRIError
from agent.kuberuntime.cri.runtime import CRIRuntime
from agent.kuberuntime.cri.security import container_security
from agent.kuberuntime.runtime import ProcessRuntime
from agent.kuberuntime.selector import RuntimeSelector

log = logging.getLogger(__name__)


def cri_selector(
    config: AgentConfig,
    process: ProcessRuntime,
    pre_start: Callable[[str, str], None],
    handler_of: Callable[[str], str] | None = None,
    cdi: Callable[[ContainerResources], ContainerResources] | None = None,
) -> RuntimeSelector:
    """The CRI runtime sharing the process runtime's record store, host facts, backoff and security policy;
    `cdi` resolves CDI names where the runtime does not (agent/cm/cdidevices.py)."""
    cri = CRIRuntime(
        config.container_runtime_endpoint,
        process.store,
        process.host,
        node=config.node_name,
        log_root=config.pod_logs_dir,
        backoff=process.backoff,
        pre_start=pre_start,
        security=functools.partial(container_security, policy=process.security),
        objects=lambda: process.objects,
        cdi=cdi,
        cdi_setting=config.cri_applies_cdi,
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
    return RuntimeSelector(process, cri, handler_of)


def runtime_class_handlers(client: Any) -> Callable[[str], str]:
    """RuntimeClass name -> its handler, read from the API server (LookupError: no such class)."""
    from kubenode.kubeclient import NotFound
    from kubenode.kubeclient.client import Resource

    runtimeclasses = Resource("runtimeclasses", "RuntimeClass", group="node.k8s.io", namespaced=False)

    def handler_of(name: str) -> str:
        try:
            runtime_class = client.get(runtimeclasses, name)
        except NotFound:
            raise LookupError("not found") from None
        return str(runtime_class.get("handler") or "")

    return handler_of


def join_cluster(runtime: object, cluster: Any) -> None:
    """The Node's containerRuntimeVersion and status.images from the runtime."""
    assert isinstance(runtime, RuntimeSelector)
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
