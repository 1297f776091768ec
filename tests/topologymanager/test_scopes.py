"""kube's scope_container_test.go and scope_pod_test.go tables (accumulateProvidersHints,
calculateAffinity), then admission through each scope."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import pytest

from agent.cm.topologymanager import TOPOLOGY_AFFINITY_ERROR, TOPOLOGY_AFFINITY_MESSAGE, BitMask, TopologyHint
from agent.cm.topologymanager.hints import ProviderHints
from agent.cm.topologymanager.merge import SINGLE_NUMA_NODE
from agent.cm.topologymanager.numainfo import NUMAInfo
from agent.cm.topologymanager.policies import BEST_EFFORT, NONE, Policy
from agent.cm.topologymanager.scopes import CONTAINER, POD, Scope
from kubenode.model import Container, Pod

M, H = BitMask.of, TopologyHint


@dataclass
class MockProvider:
    hints: ProviderHints
    allocated: list[tuple[str, TopologyHint]] = field(default_factory=list)
    refuse: str = ""

    def get_topology_hints(self, pod: Pod, container: Container) -> ProviderHints:
        return self.hints

    def get_pod_topology_hints(self, pod: Pod) -> ProviderHints:
        return self.hints

    def allocate(self, pod: Pod, container: Container, affinity: TopologyHint) -> None:
        if self.refuse:
            raise RuntimeError(self.refuse)
        self.allocated.append((container.name, affinity))


@dataclass(frozen=True)
class RecordingPolicy(Policy):
    seen: list[Sequence[ProviderHints]] = field(default_factory=list)

    def merge(self, providers_hints: Sequence[ProviderHints]) -> tuple[TopologyHint, bool]:
        self.seen.append(list(providers_hints))
        return TopologyHint(), True


ASSORTED: list[ProviderHints] = [
    {"resource-1/A": [H(M(0), True), H(M(0, 1), False)], "resource-1/B": [H(M(1), True), H(M(1, 2), False)]},
    {"resource-2/A": [H(M(2), True), H(M(3, 4), False)], "resource-2/B": [H(M(2), True), H(M(3, 4), False)]},
    {"resource-3": None},
]

ACCUMULATE_CASES: list[tuple[str, list[ProviderHints]]] = [
    ("TopologyHint not set", []),
    ("HintProvider returns empty non-nil map[string][]TopologyHint", [{}]),
    ("HintProvider returns - nil map[string][]TopologyHint from provider", [{"resource": None}]),
    ("2 HintProviders with 1 resource returns hints", [{"resource1": [H()]}, {"resource2": [H()]}]),
    ("2 HintProviders 1 with 1 resource 1 with nil hints", [{"resource1": [H()]}, None]),
    ("2 HintProviders 1 with 1 resource 1 empty hints", [{"resource1": [H()]}, {}]),
    ("HintProvider with 2 resources returns hints", [{"resource1": [H()], "resource2": [H()]}]),
    ("Assorted HintProviders", ASSORTED),
]

POD_ = Pod(
    "p", uid="uid-1", containers=(Container("a"), Container("b")), init_containers=(Container("init"),)
)


def scope(name: str, policy: Policy, hints: Sequence[ProviderHints]) -> Scope:
    s = Scope(name, policy)
    for h in hints:
        s.add_hint_provider(MockProvider(h))
    return s


@pytest.mark.parametrize("scope_name", [CONTAINER, POD])
@pytest.mark.parametrize(("name", "hints"), ACCUMULATE_CASES, ids=[c[0] for c in ACCUMULATE_CASES])
def test_accumulate_providers_hints(scope_name: str, name: str, hints: list[ProviderHints]) -> None:
    s = scope(scope_name, Policy(BEST_EFFORT, NUMAInfo((0, 1))), hints)
    if scope_name == POD:
        assert s.accumulate_pod_hints(POD_) == hints
    else:
        assert s.accumulate_container_hints(POD_, POD_.containers[0]) == hints


@pytest.mark.parametrize("scope_name", [CONTAINER, POD])
@pytest.mark.parametrize(("name", "hints"), ACCUMULATE_CASES[:3] + ACCUMULATE_CASES[-1:])
def test_calculate_affinity_hands_the_hints_to_the_policy(
    scope_name: str, name: str, hints: list[ProviderHints]
) -> None:
    policy = RecordingPolicy(BEST_EFFORT, NUMAInfo((0, 1)))
    s = scope(scope_name, policy, hints)
    assert s.admit(POD_).admit
    # The pod scope merges once; the container scope once per container, init containers first.
    assert policy.seen == [hints] * (1 if scope_name == POD else 3)


def test_container_scope_admits_container_by_container() -> None:
    provider = MockProvider({"gpu": [H(M(1), True), H(M(0, 1), False)]})
    s = Scope(CONTAINER, Policy(SINGLE_NUMA_NODE, NUMAInfo((0, 1))), [provider])
    assert s.admit(POD_).admit
    assert provider.allocated == [("init", H(M(1), True)), ("a", H(M(1), True)), ("b", H(M(1), True))]
    assert s.get_affinity("uid-1", "b") == H(M(1), True)
    assert [d.container for d in s.decisions("uid-1")] == ["init", "a", "b"]
    s.remove_pod("uid-1")
    assert s.get_affinity("uid-1", "b") == TopologyHint()


def test_refusal_is_a_topology_affinity_error_and_allocates_nothing() -> None:
    provider = MockProvider({"gpu": [H(M(0), True)], "cpu": [H(M(1), True)]})
    for name in (CONTAINER, POD):
        s = Scope(name, Policy(SINGLE_NUMA_NODE, NUMAInfo((0, 1))), [provider])
        result = s.admit(POD_)
        assert (result.admit, result.reason, result.message) == (
            False,
            TOPOLOGY_AFFINITY_ERROR,
            TOPOLOGY_AFFINITY_MESSAGE,
        )
        assert provider.allocated == []
        assert [d.admitted for d in s.decisions("uid-1")] == [False]


def test_pod_scope_gives_every_container_the_same_hint() -> None:
    provider = MockProvider({"gpu": [H(M(0), True), H(M(1), True), H(M(0, 1), False)]})
    s = Scope(POD, Policy(BEST_EFFORT, NUMAInfo((0, 1))), [provider])
    assert s.admit(POD_).admit
    assert provider.allocated == [("init", H(M(0), True)), ("a", H(M(0), True)), ("b", H(M(0), True))]


def test_allocation_failure_refuses_the_pod() -> None:
    provider = MockProvider({"gpu": [H(M(0), True)]}, refuse="no healthy devices")
    result = Scope(CONTAINER, Policy(BEST_EFFORT, NUMAInfo((0, 1))), [provider]).admit(POD_)
    assert (result.admit, result.reason) == (False, "UnexpectedAdmissionError")
    assert result.message == "Allocate failed due to no healthy devices, which is unexpected"


def test_none_policy_asks_for_no_hints() -> None:
    policy = RecordingPolicy(NONE, NUMAInfo((0, 1)))
    provider = MockProvider({"gpu": [H(M(0), True)]})
    s = Scope(CONTAINER, policy, [provider])
    assert s.admit(POD_).admit
    assert policy.seen == []
    assert provider.allocated == [("init", H()), ("a", H()), ("b", H())]
