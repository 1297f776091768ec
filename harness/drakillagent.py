"""A manifest agent with DRA, as its own process, for kill tests: `python -m harness.drakillagent ROOT
MANIFESTS STATE DRA_SOCKET CLAIMS_JSON CDI_DIR`.

It composes the agent (compose_node) on the cgroup root, manifest directory and state directory given,
with a DRA manager on STATE whose one driver, `cpu.kubenode.io`, is dialled at DRA_SOCKET and whose
claims are read from CLAIMS_JSON (`{name: ResourceClaim}`, the API server's stand-in), and whose CDI specs
are read from CDI_DIR (the driver's `--cdi-dir`: process pods apply a claim's CDI devices), prints `ready`
and runs until SIGTERM (which stops it and its pods) or SIGKILL (which leaves everything as a crash
would). The kill test (tests/agent_dra/test_killagent.py) owns the driver and counts what is left.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import signal
import sys
import threading
from pathlib import Path
from typing import Any

from agent.cm.cgroups import make_pod_cgroups
from agent.cm.dra.checkpoint import ClaimStore
from agent.cm.dra.manager import DRAManager
from agent.cm.dra.plugins import DriverClient, DriverRegistry
from agent.composition import compose_node
from agent.config.sources import ManifestSource
from harness.manifests import fast_agent_config
from kubenode.stopsignal import wait_for_stop

CPU_DRIVER = "cpu.kubenode.io"


def main(argv: list[str]) -> int:
    root, manifests, state, socket, claims_file, cdi_dir = argv
    logging.basicConfig(level=logging.INFO, format="agent %(levelname)s %(name)s: %(message)s")
    config = dataclasses.replace(
        fast_agent_config(root, Path(manifests), Path(state)), cdi_spec_dirs=[cdi_dir]
    )

    def get_claim(namespace: str, name: str) -> dict[str, Any]:
        claim: dict[str, Any] = json.loads(Path(claims_file).read_text())[name]
        return claim

    registry = DriverRegistry()
    registry.add(DriverClient(CPU_DRIVER, socket, "v1.DRAPlugin"))
    dra = DRAManager(ClaimStore(Path(state)), registry, get_claim)
    cgroups = make_pod_cgroups(root)
    agent = compose_node(config, cgroups, [ManifestSource(config.manifests, config.node_name)], dra=dra)
    stopping = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stopping.set())
    agent.start()
    print("ready", flush=True)
    wait_for_stop(stopping)  # in slices: a SIGTERM may land on a worker thread (kubenode/stopsignal.py)
    agent.stop(terminate_pods=True, timeout=20)
    cgroups.stop_and_remove_root()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
