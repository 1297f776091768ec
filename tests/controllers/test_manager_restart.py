"""SIGKILL of `kubenode controller-manager` while it scales a Deployment to 50 leaves exactly 50 pods.

The API server and two controller managers as real processes (no nodes: the pods stay Pending, which
is all a count needs). The first manager is killed once it has made some of the pods and not all; the
second takes the Lease over, lists the pods that exist before it acts, and makes only the rest. The
pod count is sampled throughout and never passes 50.
"""

from __future__ import annotations

import time

from harness.apiserver import ApiServerProcess
from tests.controllers.cluster import Cluster, Sampler, wait_for

WANTED = 50


def test_sigkill_during_a_scale_of_50_leaves_exactly_50_pods() -> None:
    with ApiServerProcess() as api:
        cluster = Cluster(api, scheduler=False)
        try:
            cluster.out("create", "deployment", "fifty", "--image=busybox", "--", "sleep", "600")
            wait_for(lambda: len(cluster.pods("app=fifty")) == 1, 60, "the first pod")
            first = cluster.manager
            assert first is not None
            with Sampler(lambda: len(cluster.pods("app=fifty")), interval=0.01) as counts:
                cluster.out("scale", "deploy/fifty", f"--replicas={WANTED}")
                wait_for(
                    lambda: counts.values and counts.values[-1] > 1, 30, "the scale under way", interval=0.002
                )
                first.process.kill()  # SIGKILL: no Lease release, requests in flight cut off
                first.process.wait(10)
                at_kill = len(cluster.pods("app=fifty"))
                second = cluster.start_manager()
                wait_for(lambda: len(cluster.pods("app=fifty")) == WANTED, 90, f"{WANTED} pods")
                time.sleep(3)  # the second manager settles: nothing more may come
            assert 1 < at_kill < WANTED, f"the kill came at {at_kill} pods, not during the scale"
            assert max(counts.values) == WANTED and len(cluster.pods("app=fifty")) == WANTED
            assert "workload controllers started" in second.output()
        finally:
            cluster.close()
