"""`with_cri_runtime`: the agent's runtime becomes the selector over its process runtime and a CRI runtime.

Asks the runtime's version once: an endpoint that is not there (or speaks another CRI version) is one clear
error line, and the agent keeps serving process pods; CRI pods show the error in their status and start when
the runtime answers (the client connects again on every sync until then).
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from agent.apis.config import AgentConfig
from agent.kuberuntime.cri.client import CRIError
from agent.kuberuntime.cri.runtime import CRIRuntime
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
        pre_start=agent._pre_start_devices,
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
