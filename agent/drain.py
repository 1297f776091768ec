"""`kubenode agent drain`: undo everything a stopped agent left behind on purpose.

The agent leaves its pods running when it stops (a restarted agent adopts them, as the kubelet does).
Draining is the way to really stop them: an agent is built on the same state directory and cgroup root
but with a manifest source that has no pods, so starting it adopts every recorded pod and, finding none
wanted, stops each as an orphan (processes, pod cgroup, record). Stopping it with terminate_pods then
removes the QoS tiers and the cgroup root, and the pods' logs are deleted last. The caller holds the
cgroup root's lock (kubenode/runlock.py), so a running agent is never drained from under it.
"""

from __future__ import annotations

import dataclasses
import logging
import shutil
import sys
import tempfile
from pathlib import Path

from agent.apis.config import AgentConfig
from agent.daemon import RunningAgent, build_node_agent

log = logging.getLogger(__name__)


def drain(config: AgentConfig) -> int:
    records = config.state_dir / "pods"
    before = len(list(records.glob("*.json"))) if records.is_dir() else 0
    with tempfile.TemporaryDirectory(prefix="kubenode-drain-") as no_pods:
        # No status endpoint and no device manager: nothing may be allocated or reported while draining.
        quiet = dataclasses.replace(config, manifests=Path(no_pods), listen="", device_plugin_dir=None)
        agent = build_node_agent(quiet, None)
        running = RunningAgent(quiet, agent, None, None)
        try:
            running.start()  # adopts the recorded pods and stops them as orphans
        finally:
            running.stop(terminate_pods=True)
    left = sorted(p.name for p in records.glob("*")) if records.is_dir() else []
    logs = config.state_dir / "logs"
    shutil.rmtree(logs, ignore_errors=True)
    if records.is_dir() and not left:
        records.rmdir()
    print(
        f"kubenode agent drain: stopped {before - len(left)} pod(s); removed their cgroups"
        f" (cgroup root {config.cgroup_root or '/'}), records and logs ({logs})"
    )
    if left:
        print(f"kubenode agent drain: could not stop {', '.join(left)} (see the log above)", file=sys.stderr)
        return 1
    return 0
