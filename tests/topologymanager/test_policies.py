"""kube's policy tables (policy_test.go, policy_{none,best_effort,restricted,single_numa_node}_test.go)
run against our merge, case by case."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import pytest

from agent.cm.topologymanager.bitmask import BitMask
from agent.cm.topologymanager.hints import ProviderHints, TopologyHint
from agent.cm.topologymanager.merge import SINGLE_NUMA_NODE, HintMerger, max_of_min_affinity_counts
from agent.cm.topologymanager.numainfo import NUMAInfo
from agent.cm.topologymanager.options import PolicyOptions
from agent.cm.topologymanager.policies import (
    BEST_EFFORT,
    NONE,
    RESTRICTED,
    Policy,
    filter_single_numa_hints,
)
from tests.topologymanager import kube_tables as kt

F, T = False, True


def info(distances: Mapping[int, list[int]]) -> NUMAInfo:
    return NUMAInfo(tuple(sorted(distances)), distances)


def to_hint(hint: kt.Hint, nodes: Sequence[int] = ()) -> TopologyHint:
    bits, preferred = hint
    if bits is None:
        return TopologyHint(None, preferred)
    return TopologyHint(BitMask.of(*(nodes if bits == kt.ALL else bits)), preferred)


def to_providers(providers: list[kt.Provider]) -> list[ProviderHints]:
    converted: list[ProviderHints] = []
    for provider in providers:
        if provider is None:
            converted.append(None)
            continue
        converted.append(
            {r: None if hints is None else [to_hint(h) for h in hints] for r, hints in provider.items()}
        )
    return converted


def run_cases(policy: Policy, cases: list[kt.Case]) -> None:
    failures = []
    for name, providers, expected in cases:
        actual, _ = policy.merge(to_providers(providers))
        want = to_hint(expected, policy.numa_info.nodes)
        if actual != want:
            failures.append(f"{name}: expected {want}, got {actual}")
    assert not failures, "\n".join(failures)


def test_policy_none_merge() -> None:
    # TestPolicyNoneMerge: whatever the hints, an empty hint and admit.
    policy = Policy(NONE, info(kt.TWO_NODES))
    for _, providers, _ in kt.COMMON + kt.BEST_EFFORT:
        assert policy.merge(to_providers(providers)) == (TopologyHint(), True)


@pytest.mark.parametrize("name", [NONE, BEST_EFFORT, RESTRICTED, SINGLE_NUMA_NODE])
def test_policy_name(name: str) -> None:
    assert Policy(name, info(kt.TWO_NODES)).name == name


@pytest.mark.parametrize(
    ("name", "hint", "expected"),
    [
        (NONE, TopologyHint(None, F), T),
        (NONE, TopologyHint(None, T), T),
        (BEST_EFFORT, TopologyHint(None, F), T),
        (BEST_EFFORT, TopologyHint(None, T), T),
        (RESTRICTED, TopologyHint(None, F), F),
        (RESTRICTED, TopologyHint(None, T), T),
        (SINGLE_NUMA_NODE, TopologyHint(None, F), F),
    ],
)
def test_can_admit_pod_result(name: str, hint: TopologyHint, expected: bool) -> None:
    assert Policy(name, info(kt.TWO_NODES)).can_admit(hint) is expected


@pytest.mark.parametrize("name", [BEST_EFFORT, RESTRICTED])
def test_policy_merge(name: str) -> None:
    # TestPolicyBestEffortMerge, TestPolicyRestrictedMerge: four nodes.
    run_cases(Policy(name, info(kt.FOUR_NODES)), kt.COMMON + kt.BEST_EFFORT + kt.NO_POLICIES)


@pytest.mark.parametrize("name", [BEST_EFFORT, RESTRICTED])
def test_policy_merge_closest_numa(name: str) -> None:
    # TestPolicy{BestEffort,Restricted}MergeClosestNUMA: eight nodes, prefer-closest-numa-nodes.
    policy = Policy(name, info(kt.EIGHT_NODES), PolicyOptions(prefer_closest_numa=True))
    run_cases(policy, kt.COMMON + kt.BEST_EFFORT + kt.CLOSEST_NUMA)


def test_policy_single_numa_node_merge() -> None:
    run_cases(Policy(SINGLE_NUMA_NODE, info(kt.FOUR_NODES)), kt.COMMON + kt.SINGLE_NUMA_NODE)


def test_single_numa_node_ignores_prefer_closest() -> None:
    # The option is not applied under single-numa-node (NewHintMerger); masks are one node wide there.
    policy = Policy(SINGLE_NUMA_NODE, info(kt.EIGHT_NODES), PolicyOptions(prefer_closest_numa=True))
    run_cases(policy, kt.COMMON)


# Hints naming node 1 on a machine whose sysfs lists node 0 only (static devices of a fake topology): node 1
# is one of the machine's, so node 0 alone is not "every node" (issue 37: it read as "any", and the devices
# were then allocated apart).
REPORTED_NODE_CASES: list[tuple[str, list[kt.Provider], kt.Hint]] = [
    (
        "1 gpu + 1 nic, both on node 0 or node 1",
        [{"gpu": [((0,), T), ((1,), T), ((0, 1), F)], "nic": [((0,), T), ((1,), T), ((0, 1), F)]}],
        ((0,), T),
    ),
    (
        "1 gpu + 2 nics, the nics only on node 1",
        [{"gpu": [((0,), T), ((1,), T), ((0, 1), F)], "nic": [((1,), T), ((0, 1), F)]}],
        ((1,), T),
    ),
    ("no node holds both", [{"gpu": [((0,), T), ((0, 1), F)], "nic": [((1,), T), ((0, 1), F)]}], (None, F)),
    # A mask of every listed node with no other node named is still "any" (kube on a one-node machine).
    ("only node 0 named", [{"gpu": [((0,), T)], "nic": [((0,), T)]}], (None, T)),
]


@pytest.mark.parametrize(
    ("name", "providers", "expected"), REPORTED_NODE_CASES, ids=[c[0] for c in REPORTED_NODE_CASES]
)
def test_single_numa_node_counts_the_nodes_hints_name(
    name: str, providers: list[kt.Provider], expected: kt.Hint
) -> None:
    policy = Policy(SINGLE_NUMA_NODE, NUMAInfo((0,), {0: [10]}))
    hint, admit = policy.merge(to_providers(providers))
    assert (hint, admit) == (to_hint(expected), expected[1])


@pytest.mark.parametrize("name", [BEST_EFFORT, RESTRICTED, SINGLE_NUMA_NODE])
def test_admit_follows_preference(name: str) -> None:
    policy = Policy(name, info(kt.FOUR_NODES))
    for _, providers, _ in kt.COMMON + kt.BEST_EFFORT:
        hint, admit = policy.merge(to_providers(providers))
        assert admit is (name == BEST_EFFORT or hint.preferred)


H = TopologyHint
M = BitMask.of


@pytest.mark.parametrize(
    ("name", "hints", "expected"),
    [
        ("filter empty resources", [], []),
        ("filter hints with nil socket mask 1/2", [[H(None, F)], [H(None, T)]], [[], [H(None, T)]]),
        (
            "filter hints with nil socket mask 2/2",
            [[H(M(0), T), H(None, F)], [H(M(1), T), H(None, T)]],
            [[H(M(0), T)], [H(M(1), T), H(None, T)]],
        ),
        (
            "filter hints with empty resource socket mask",
            [[H(M(1), T), H(M(0), T), H(None, F)], []],
            [[H(M(1), T), H(M(0), T)], []],
        ),
        (
            "filter hints with wide sockemask",
            [
                [H(M(0), T), H(M(1), T), H(M(1, 2), F), H(M(0, 1, 2), F), H(None, F)],
                [H(M(1, 2), F), H(M(0, 1, 2), F), H(M(0, 2), F), H(M(3), F)],
                [H(M(1, 2), F), H(M(0, 1, 2), F), H(M(0, 2), F)],
            ],
            [[H(M(0), T), H(M(1), T)], [], []],
        ),
    ],
)
def test_single_numa_node_filter_hints(
    name: str, hints: list[list[TopologyHint]], expected: list[list[TopologyHint]]
) -> None:
    assert filter_single_numa_hints(hints) == expected


@pytest.mark.parametrize(("hints", "expected"), kt.MAX_OF_MIN)
def test_max_of_min_affinity_counts(hints: list[list[kt.Hint]], expected: int) -> None:
    assert max_of_min_affinity_counts([[to_hint(h) for h in r] for r in hints]) == expected


@pytest.mark.parametrize(
    ("name", "best_count", "current", "candidate", "expected"), kt.COMPARE, ids=[c[0] for c in kt.COMPARE]
)
def test_compare_hints_narrowest(
    name: str, best_count: int, current: kt.Hint | None, candidate: kt.Hint, expected: str
) -> None:
    merger = HintMerger(NUMAInfo(()), [], BEST_EFFORT)
    merger.best_non_preferred_affinity_count = best_count
    current_hint = None if current is None else to_hint(current)
    candidate_hint = to_hint(candidate)
    result = merger.compare(current_hint, candidate_hint)
    assert result is (current_hint if expected == "current" else candidate_hint)
