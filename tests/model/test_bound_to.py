"""Pod.bound_to: the scheduler's fast copy of a pod placed on a node."""

from __future__ import annotations

import dataclasses

from kubenode.model.objects import Container, Pod, Toleration


def test_bound_to_equals_replace_and_leaves_the_pod_alone() -> None:
    pod = Pod(
        name="web",
        nominated_node_name="old",
        containers=(Container(name="c", requests={"cpu": 250}, limits={"cpu": 500}),),
        tolerations=(Toleration(key="gpu", operator="Exists"),),
    )
    assert pod.requests == {"cpu": 250}  # cached before the copy
    bound = pod.bound_to("node-1")
    assert bound == dataclasses.replace(pod, node_name="node-1", nominated_node_name="")
    assert (bound.node_name, bound.nominated_node_name) == ("node-1", "")
    assert (pod.node_name, pod.nominated_node_name) == ("", "old")
    assert bound.requests == pod.requests and bound.qos_class == pod.qos_class
