"""Topology hints and the hint providers' interface (the kubelet's topologymanager.TopologyHint,
HintProvider and the admission result).

A hint says "this resource of this container can be placed on these NUMA nodes" and whether that
placement is preferred (as narrow as the resource allows). A provider answers, per resource:
- None: no preference (the resource has no topology); the merge treats it as "any node, preferred";
- []: no possible placement (not enough free devices); the merge treats it as "any node, not preferred";
- a list of hints.
A provider that answers None for the whole container has no preference for any resource.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol

from agent.cm.topologymanager.bitmask import BitMask
from kubenode.model import Container, Pod

TOPOLOGY_AFFINITY_ERROR = "TopologyAffinityError"
TOPOLOGY_AFFINITY_MESSAGE = "Resources cannot be allocated with Topology locality"
UNEXPECTED_ADMISSION_ERROR = "UnexpectedAdmissionError"


@dataclass(frozen=True)
class TopologyHint:
    """NUMA nodes a resource can be placed on (None: any) and whether that placement is preferred."""

    affinity: BitMask | None = None
    preferred: bool = False

    def sort_key(self) -> tuple[bool, int, int]:
        """kube's LessThan: preferred first, then narrower."""
        mask = self.affinity or BitMask()
        return (not self.preferred, mask.count(), mask.value)

    def __str__(self) -> str:
        nodes = "any" if self.affinity is None else ",".join(map(str, self.affinity.bits())) or "none"
        return f"{{{nodes} {'preferred' if self.preferred else 'not preferred'}}}"


# Per resource: None (no preference), [] (impossible) or the hints; None for the whole provider.
ResourceHints = Mapping[str, Sequence[TopologyHint] | None]
ProviderHints = ResourceHints | None


class HintProvider(Protocol):
    """What the Topology Manager asks of a resource manager (the device manager here)."""

    def get_topology_hints(self, pod: Pod, container: Container) -> ProviderHints: ...

    def get_pod_topology_hints(self, pod: Pod) -> ProviderHints: ...

    def allocate(self, pod: Pod, container: Container, affinity: TopologyHint) -> None:
        """Allocate the container's resources within the affinity; raise to refuse the pod."""
        ...


@dataclass(frozen=True)
class AdmitResult:
    """The kubelet's PodAdmitResult: a refused pod fails with this reason and message."""

    admit: bool
    reason: str = ""
    message: str = ""


ADMITTED = AdmitResult(True)
TOPOLOGY_REFUSED = AdmitResult(False, TOPOLOGY_AFFINITY_ERROR, TOPOLOGY_AFFINITY_MESSAGE)


def allocation_refused(error: Exception) -> AdmitResult:
    """An allocation that failed during admission (kube's unexpectedAdmissionError)."""
    return AdmitResult(
        False, UNEXPECTED_ADMISSION_ERROR, f"Allocate failed due to {error}, which is unexpected"
    )
