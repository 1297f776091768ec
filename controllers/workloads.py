"""The workload controllers on one set of shared informers, started once every informer has listed.

`WorkloadControllers.start` starts the informers and, on a thread of its own (the leader election's
callback must not block), waits for their first lists (kube's WaitForCacheSync) before any worker
runs: a controller restarted in the middle of a scale counts the pods that already exist first.
The ResourceClaim controller runs where the API serves resource.k8s.io/v1 (probed once at start).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

from controllers.daemonset import DaemonSetController
from controllers.deployment import DeploymentController
from controllers.framework import Controller, SharedInformers
from controllers.garbagecollector import GarbageCollector
from controllers.job import JobController
from controllers.replicaset import ReplicaSetController
from controllers.resourceclaim import ResourceClaimController
from controllers.rootcapublisher import RootCAPublisher
from controllers.serviceaccount import ServiceAccountsController
from kubenode.kubeclient import RESOURCE_CLAIMS, KubeClient, KubeError, NotFound

log = logging.getLogger(__name__)


def serves_claims(client: KubeClient) -> bool:
    """Whether the API serves resource.k8s.io/v1 ResourceClaims (kube-apiserver 1.34+, kubenode apiserver)."""
    try:
        client.list(RESOURCE_CLAIMS, limit=1)
    except NotFound:
        log.info("the API serves no resource.k8s.io/v1: the ResourceClaim controller does not run")
        return False
    except KubeError as err:  # forbidden, unreachable: the informers report and retry
        log.warning("listing ResourceClaims: %s", err)
    return True


class WorkloadControllers:
    def __init__(
        self, client: KubeClient, may_act: Callable[[], bool], stop: threading.Event, root_ca: str = ""
    ) -> None:
        self.informers = SharedInformers(client)
        self._stop = stop
        # The claim controller first: it registers ResourceClaims with the garbage collector. An API
        # without resource.k8s.io/v1 gets none (its informers would never sync, holding every worker).
        claims = [ResourceClaimController(client, self.informers, may_act)] if serves_claims(client) else []
        self.controllers: list[Controller] = [
            GarbageCollector(client, self.informers, may_act),
            ReplicaSetController(client, self.informers, may_act),
            DeploymentController(client, self.informers, may_act),
            DaemonSetController(client, self.informers, may_act),
            JobController(client, self.informers, may_act),
            ServiceAccountsController(client, self.informers, may_act),
            *claims,
        ]
        if root_ca:  # kube-controller-manager's --root-ca-file, or its kubeconfig's CA
            self.controllers.append(RootCAPublisher(client, self.informers, may_act, root_ca))
        self._starter: threading.Thread | None = None

    def start(self) -> None:
        self.informers.start()
        self._starter = threading.Thread(target=self._start_workers, name="workload-controllers", daemon=True)
        self._starter.start()

    def _start_workers(self) -> None:
        if not self.informers.wait_for_sync(self._stop):
            return
        for controller in self.controllers:
            controller.start()
        log.info("workload controllers started: %s", ", ".join(c.name for c in self.controllers))

    def stop(self) -> None:
        if self._starter is not None:
            self._starter.join(10)
        for controller in self.controllers:
            controller.stop()
        self.informers.stop()
