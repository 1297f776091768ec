"""The agent that harness/crikillcycles.py forks: CRI pods from a manifest directory, and a kill point.

`run_agent` runs a manifest-only agent whose runtime is the selector over the process runtime and a CRI
runtime at `endpoint` (as `kubenode agent --container-runtime-endpoint` wires it), until it is killed or its
parent (the fork server) dies. With a kill point (`kill_after`), the agent SIGKILLs itself right after the Nth
successful call of one CRI method: the call has taken effect in containerd, nothing after it has happened.
With CRIKILL_LOG set, the agent logs at INFO there and dumps its threads' stacks there on SIGUSR1.
"""

from __future__ import annotations

import dataclasses
import faulthandler
import logging
import os
import signal
import time
from pathlib import Path
from typing import Any

from agent.cm.cgroups import make_pod_cgroups
from agent.composition import compose_node
from agent.config.sources import ManifestSource
from agent.kuberuntime.cri.runtime import CRIRuntime
from agent.kuberuntime.selector import RuntimeSelector
from agent.util.libc import LIBC, check
from harness.manifests import fast_agent_config

NODE = "testnode"
PR_SET_PDEATHSIG = 1


def kill_after(runtime: CRIRuntime, method: str, nth: int) -> None:
    """Make `runtime` SIGKILL its own process right after the `nth` successful `method` call."""
    original = runtime._call
    calls = 0

    def call(name: str, request: Any, timeout: float | None = None) -> Any:
        nonlocal calls
        answer = original(name, request, timeout)
        if name == method:
            calls += 1
            if calls == nth:
                os.kill(os.getpid(), signal.SIGKILL)
        return answer

    runtime._call = call  # type: ignore[method-assign,assignment]  # fault injection on this one instance


def run_agent(
    root: str, manifests: Path, state: Path, endpoint: str, logs: Path, point: str, nth: int
) -> None:
    """The child: an agent running CRI pods on the shared state, until it is killed (or its parent dies)."""
    check(LIBC.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0), "prctl(PR_SET_PDEATHSIG)")
    log_file = os.environ.get("CRIKILL_LOG")
    logging.basicConfig(
        level=logging.INFO if log_file else logging.ERROR,
        filename=log_file,
        format=f"%(asctime)s {point or 'B'}#{nth} %(name)s %(levelname)s %(message)s",
    )
    if log_file:
        faulthandler.register(signal.SIGUSR1, open(log_file, "a"))  # noqa: SIM115  # open until killed
    config = dataclasses.replace(
        fast_agent_config(root, manifests, state, housekeeping_interval=0.2),
        container_runtime_endpoint=endpoint,
        pod_logs_dir=logs,
    )
    agent = compose_node(
        config, make_pod_cgroups(root), [ManifestSource(manifests, NODE, rescan_interval=1.0)]
    )
    selector = agent.runtime
    assert isinstance(selector, RuntimeSelector)  # the config names a CRI endpoint
    if point:
        kill_after(selector.cri, point, nth)
    agent.start()
    while True:
        time.sleep(3600)
