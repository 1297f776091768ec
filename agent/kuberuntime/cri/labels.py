"""The labels and annotations the kubelet puts on sandboxes and containers (kuberuntime/labels.go).

Any CRI tool (crictl, ctr) then shows our pods as it shows a kubelet's, and a restarted agent finds its pods'
sandboxes and containers by `io.kubernetes.pod.uid` and `io.kubernetes.container.name` alone.
"""

from __future__ import annotations

from collections.abc import Mapping

from kubenode.model import Container, Pod

POD_NAME = "io.kubernetes.pod.name"
POD_NAMESPACE = "io.kubernetes.pod.namespace"
POD_UID = "io.kubernetes.pod.uid"
CONTAINER_NAME = "io.kubernetes.container.name"
CONTAINER_TYPE = "io.kubernetes.container.type"  # the kubelet's pre-sidecar label; kept for tools
RESTART_COUNT = "io.kubernetes.container.restartCount"
TERMINATION_MESSAGE_PATH = "io.kubernetes.container.terminationMessagePath"
TERMINATION_MESSAGE_POLICY = "io.kubernetes.container.terminationMessagePolicy"
POD_TERMINATION_GRACE = "io.kubernetes.pod.terminationGracePeriod"
# Ours: which agent made it, so that two agents on one containerd (tests) never take each other's pods.
NODE = "kubenode.io/node"


def sandbox_labels(pod: Pod, node: str) -> dict[str, str]:
    """The pod's labels plus the kubelet's identity labels (newPodLabels)."""
    labels = dict(pod.labels)
    labels.update({POD_NAME: pod.name, POD_NAMESPACE: pod.namespace, POD_UID: pod.uid, NODE: node})
    return labels


def sandbox_annotations(pod: Pod) -> dict[str, str]:
    return dict(pod.annotations)


def container_labels(pod: Pod, c: Container, node: str) -> dict[str, str]:
    return {
        POD_NAME: pod.name,
        POD_NAMESPACE: pod.namespace,
        POD_UID: pod.uid,
        CONTAINER_NAME: c.name,
        NODE: node,
    }


def container_annotations(
    pod: Pod, c: Container, restart_count: int, raw: Mapping[str, object]
) -> dict[str, str]:
    return {
        RESTART_COUNT: str(restart_count),
        TERMINATION_MESSAGE_PATH: str(raw.get("terminationMessagePath") or "/dev/termination-log"),
        TERMINATION_MESSAGE_POLICY: str(raw.get("terminationMessagePolicy") or "File"),
        POD_TERMINATION_GRACE: str(pod.termination_grace_period_seconds),
    }
