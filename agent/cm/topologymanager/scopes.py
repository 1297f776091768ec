"""Scopes: what one merge covers (the kubelet's topologymanager/scope*.go).

- container: each container (init containers first) is merged on its own hints and, once admitted,
  allocated before the next one's hints are asked for, so later containers see what earlier ones took;
- pod: one merge over the whole pod's hints, the result given to every container;
- under the none policy neither: no hints are asked for and every container is allocated unaligned.
A refused merge stops admission with TopologyAffinityError; an allocation that fails stops it with
UnexpectedAdmissionError. The affinity of each admitted container is kept until `remove_pod`.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Sequence
from dataclasses import dataclass, field

from agent.cm.topologymanager.hints import (
    ADMITTED,
    TOPOLOGY_REFUSED,
    AdmitResult,
    HintProvider,
    ProviderHints,
    TopologyHint,
    allocation_refused,
)
from agent.cm.topologymanager.policies import NONE, Policy
from kubenode.model import Container, Pod

log = logging.getLogger("agent.cm.topologymanager")

CONTAINER = "container"
POD = "pod"
SCOPES = (CONTAINER, POD)


@dataclass(frozen=True)
class Decision:
    """What one merge saw and chose, for `kubenode trace`: per provider, its hints; the merged hint."""

    container: str  # "" for the pod scope
    hints: tuple[ProviderHints, ...]
    merged: TopologyHint
    admitted: bool


@dataclass
class Scope:
    name: str
    policy: Policy
    providers: list[HintProvider] = field(default_factory=list)
    _affinity: dict[str, dict[str, TopologyHint]] = field(default_factory=dict)
    _decisions: dict[str, list[Decision]] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def add_hint_provider(self, provider: HintProvider) -> None:
        self.providers.append(provider)

    def get_affinity(self, pod_uid: str, container: str) -> TopologyHint:
        with self._lock:
            return self._affinity.get(pod_uid, {}).get(container, TopologyHint())

    def decisions(self, pod_uid: str) -> list[Decision]:
        with self._lock:
            return list(self._decisions.get(pod_uid, ()))

    def remove_pod(self, pod_uid: str) -> None:
        with self._lock:
            self._affinity.pop(pod_uid, None)
            self._decisions.pop(pod_uid, None)

    def _set(self, pod: Pod, container: str, hint: TopologyHint) -> None:
        with self._lock:
            self._affinity.setdefault(pod.uid, {})[container] = hint

    def _record(self, pod: Pod, decision: Decision) -> None:
        with self._lock:
            self._decisions.setdefault(pod.uid, []).append(decision)

    def _allocate(self, pod: Pod, container: Container, hint: TopologyHint) -> AdmitResult | None:
        for provider in self.providers:
            try:
                provider.allocate(pod, container, hint)
            except Exception as err:  # a provider's refusal of any kind refuses the pod, as the kubelet's
                return allocation_refused(err)
        return None

    def admit(self, pod: Pod) -> AdmitResult:
        with self._lock:
            self._decisions.pop(pod.uid, None)
        if self.policy.name == NONE:
            return self._admit_without_hints(pod)
        if self.name == POD:
            return self._admit_pod(pod)
        return self._admit_containers(pod)

    def accumulate_container_hints(self, pod: Pod, container: Container) -> list[ProviderHints]:
        return [provider.get_topology_hints(pod, container) for provider in self.providers]

    def accumulate_pod_hints(self, pod: Pod) -> list[ProviderHints]:
        return [provider.get_pod_topology_hints(pod) for provider in self.providers]

    def calculate_affinity(self, hints: Sequence[ProviderHints]) -> tuple[TopologyHint, bool]:
        return self.policy.merge(hints)

    def _admit_containers(self, pod: Pod) -> AdmitResult:
        for container in pod.all_containers:
            hints = self.accumulate_container_hints(pod, container)
            best, admit = self.calculate_affinity(hints)
            self._record(pod, Decision(container.name, tuple(hints), best, admit))
            log.debug("pod %s container %s: hints %s, best %s", pod.key, container.name, hints, best)
            if not admit:
                return TOPOLOGY_REFUSED
            self._set(pod, container.name, best)
            if (refused := self._allocate(pod, container, best)) is not None:
                return refused
        return ADMITTED

    def _admit_without_hints(self, pod: Pod) -> AdmitResult:
        """The none policy (kube's noneScope): no hints asked for, every container allocated unaligned."""
        for container in pod.all_containers:
            if (refused := self._allocate(pod, container, TopologyHint())) is not None:
                return refused
        return ADMITTED

    def _admit_pod(self, pod: Pod) -> AdmitResult:
        hints = self.accumulate_pod_hints(pod)
        best, admit = self.calculate_affinity(hints)
        self._record(pod, Decision("", tuple(hints), best, admit))
        if not admit:
            return TOPOLOGY_REFUSED
        for container in pod.all_containers:
            self._set(pod, container.name, best)
            if (refused := self._allocate(pod, container, best)) is not None:
                return refused
        return ADMITTED
