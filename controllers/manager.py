"""`kubenode controller-manager`: the controllers of this package, run by whoever holds the Lease.

Flow, as kube-controller-manager's Run:
1. With leader election (the default, as kube's `--leader-elect=true`), a LeaderElector on the Lease
   kube-system/kube-controller-manager (kubenode/kubeclient/leaderelection.py, the scheduler's code)
   decides who runs the controllers; without it this process always does.
2. Once leading, the controllers start: the node lifecycle controller (its Node informer, its worker),
   then the workload controllers (`workloads.py`: garbage collector, ReplicaSet, Deployment, DaemonSet,
   Job, ServiceAccount, root CA publisher) on shared informers, whose workers wait for every informer's
   first list.
3. Losing the Lease stops every write at once (`may_act` turns false before any callback runs) and
   `run_controller_manager` returns 1, so the supervisor restarts the process as a follower.
   SIGTERM/SIGINT stop it cleanly (the Lease is released) with 0.
"""

from __future__ import annotations

import logging
import signal
import threading
from dataclasses import dataclass, field

from controllers.nodelifecycle import NodeLifecycleController
from controllers.workloads import WorkloadControllers
from kubenode.kubeclient import KubeClient
from kubenode.kubeclient.config import ClientConfig
from kubenode.kubeclient.leaderelection import ClientLeaseStore, ElectionConfig, LeaderElector

log = logging.getLogger(__name__)

LOCK_NAME = "kube-controller-manager"


@dataclass(frozen=True)
class ManagerOptions:
    leader_elect: bool = True
    election: ElectionConfig = field(default_factory=lambda: ElectionConfig(name=LOCK_NAME))
    root_ca: str = ""  # PEM published as kube-root-ca.crt in every namespace ("" : the kubeconfig's CA)


def _kubeconfig_ca(client_config: ClientConfig) -> str:
    """The CA the controller manager trusts the API server with (kube's default for --root-ca-file)."""
    if not client_config.ca_file:
        return ""
    with open(client_config.ca_file, encoding="utf-8") as handle:
        return handle.read()


class ControllerManager:
    def __init__(self, client_config: ClientConfig, options: ManagerOptions) -> None:
        self.options = options
        self.client = KubeClient(client_config, user_agent="kubenode-controller-manager")
        self._stop = threading.Event()
        self.lost_leadership = False
        self.node_lifecycle = NodeLifecycleController(self.client, may_act=self.may_act)
        self.workloads = WorkloadControllers(
            self.client, self.may_act, self._stop, options.root_ca or _kubeconfig_ca(client_config)
        )
        self._started = False
        self.elector: LeaderElector | None = None
        self._election: threading.Thread | None = None
        if options.leader_elect:
            # A short timeout of its own: a hung Lease request must not outlast the renew deadline.
            lease_client = KubeClient(
                client_config,
                user_agent="kubenode-controller-manager/leader-election",
                timeout=max(1.0, options.election.retry_period),
            )
            self.elector = LeaderElector(
                ClientLeaseStore(lease_client),
                options.election,
                on_started_leading=self._start_controllers,
                on_stopped_leading=self._stopped_leading,
                on_new_leader=lambda who: log.info("new leader: %s", who),
            )

    def may_act(self) -> bool:
        if self.elector is not None and not self.elector.is_leader():
            return False
        return not self._stop.is_set()

    def _start_controllers(self) -> None:
        log.info("started leading: starting the controllers")
        self._started = True
        self.node_lifecycle.start()
        self.workloads.start()

    def _stopped_leading(self) -> None:
        if not self._stop.is_set():
            self.lost_leadership = True
            log.error("leader election lost: stopping")
            self._stop.set()

    def start(self) -> None:
        if self.elector is None:
            self._start_controllers()
            return
        elector = self.elector
        self._election = threading.Thread(target=lambda: elector.run(self._stop), name="leader-election")
        self._election.daemon = True
        self._election.start()

    def request_stop(self) -> None:
        self._stop.set()

    def wait(self, timeout: float | None = None) -> bool:
        return self._stop.wait(timeout)

    def stop(self) -> None:
        self._stop.set()
        if self._election is not None:
            self._election.join(15)  # releases the Lease on a clean stop
        if self._started:
            self.node_lifecycle.stop()
            self.workloads.stop()
        self.client.close()


def run_controller_manager(client_config: ClientConfig, options: ManagerOptions) -> int:
    """Run until SIGTERM/SIGINT (0) or lost leadership (1)."""
    manager = ControllerManager(client_config, options)
    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, lambda *_: manager.request_stop())
    manager.start()
    while not manager.wait(1.0):
        pass
    manager.stop()
    return 1 if manager.lost_leadership else 0
