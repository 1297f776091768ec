"""kube's merge tables (topologymanager/policy_test.go), one tuple per Go test case, same names.

A hint is (NUMA nodes or None for "any", preferred); a provider maps resource -> hints (None: no
preference, []: impossible) or is None as a whole (kube's mockHintProvider{} / {nil}). "all" as
the expected nodes stands for every NUMA node of the machine under test (NewTestBitMask(numaNodes...)).
"""

from __future__ import annotations

from typing import Literal

Nodes = tuple[int, ...] | None | Literal["all"]
Hint = tuple[Nodes, bool]
Provider = dict[str, list[Hint] | None] | None
Case = tuple[str, list[Provider], Hint]

T, F = True, False
ALL: Literal["all"] = "all"


def two(first: list[Hint], second: list[Hint]) -> list[Provider]:
    """Two providers of one resource each, "resource1" and "resource2"."""
    return [{"resource1": first}, {"resource2": second}]


# commonPolicyMergeTestCases
COMMON: list[Case] = [
    ("Two providers, 1 hint each, same mask, both preferred 1/2", two([((0,), T)], [((0,), T)]), ((0,), T)),
    ("Two providers, 1 hint each, same mask, both preferred 2/2", two([((1,), T)], [((1,), T)]), ((1,), T)),
    ("Two providers, 1 no hints, 1 single hint preferred 1/2", [None, {"resource": [((0,), T)]}], ((0,), T)),
    ("Two providers, 1 no hints, 1 single hint preferred 2/2", [None, {"resource": [((1,), T)]}], ((1,), T)),
    (
        "Two providers, 1 with 2 hints, 1 with single hint matching 1/2",
        two([((0,), T), ((1,), T)], [((0,), T)]),
        ((0,), T),
    ),
    (
        "Two providers, 1 with 2 hints, 1 with single hint matching 2/2",
        two([((0,), T), ((1,), T)], [((1,), T)]),
        ((1,), T),
    ),
    (
        "Two providers, both with 2 hints, matching narrower preferred hint from both",
        two([((0,), T), ((1,), T)], [((0,), T), ((0, 1), F)]),
        ((0,), T),
    ),
    (
        "Ensure less narrow preferred hints are chosen over narrower non-preferred hints",
        two([((1,), T), ((0, 1), F)], [((0,), T), ((1,), T), ((0, 1), F)]),
        ((1,), T),
    ),
    (
        "Multiple resources, same provider",
        [{"resource1": [((1,), T), ((0, 1), F)], "resource2": [((0,), T), ((1,), T), ((0, 1), F)]}],
        ((1,), T),
    ),
]

# (p *bestEffortPolicy) mergeTestCases, which restricted shares
BEST_EFFORT: list[Case] = [
    (
        "Two providers, 2 hints each, same mask (some with different bits), same preferred",
        two([((0, 1), T), ((0, 2), T)], [((0, 1), T), ((0, 2), T)]),
        ((0, 1), T),
    ),
    ("TopologyHint not set", [], (ALL, T)),
    ("HintProvider returns empty non-nil map[string][]TopologyHint", [{}], (ALL, T)),
    ("HintProvider returns -nil map[string][]TopologyHint from provider", [{"resource": None}], (ALL, T)),
    (
        "HintProvider returns empty non-nil map[string][]TopologyHint from provider",
        [{"resource": []}],
        (ALL, F),
    ),
    (
        "Single TopologyHint with Preferred as true and NUMANodeAffinity as nil",
        [{"resource": [(None, T)]}],
        (ALL, T),
    ),
    (
        "Single TopologyHint with Preferred as false and NUMANodeAffinity as nil",
        [{"resource": [(None, F)]}],
        (ALL, F),
    ),
    ("Two providers, 1 hint each, no common mask", two([((0,), T)], [((1,), T)]), (ALL, F)),
    (
        "Two providers, 1 hint each, same mask, 1 preferred, 1 not 1/2",
        two([((0,), T)], [((0,), F)]),
        ((0,), F),
    ),
    (
        "Two providers, 1 hint each, same mask, 1 preferred, 1 not 2/2",
        two([((1,), T)], [((1,), F)]),
        ((1,), F),
    ),
    (
        "Two providers, 1 hint each, 1 wider mask, both preferred 1/2",
        two([((0,), T)], [((0, 1), T)]),
        ((0,), F),
    ),
    (
        "Two providers, 1 with 2 hints, 1 with single non-preferred hint matching",
        two([((0,), T), ((1,), T)], [((0, 1), F)]),
        ((0,), F),
    ),
    (
        "Two providers, 1 hint each, 1 wider mask, both preferred 2/2",
        two([((1,), T)], [((0, 1), T)]),
        ((1,), F),
    ),
    (
        "bestNonPreferredAffinityCount (1)",
        two([((0, 1, 2, 3), F), ((0, 1), F)], [((0, 1), F)]),
        ((0, 1), F),
    ),
    (
        "bestNonPreferredAffinityCount (2)",
        two([((0, 1, 2, 3), F), ((0, 1), F)], [((0, 3), F)]),
        ((0, 3), F),
    ),
    (
        "bestNonPreferredAffinityCount (3)",
        two([((0, 1, 2, 3), F), ((0, 1), F)], [((1, 2), F)]),
        ((1, 2), F),
    ),
    (
        "bestNonPreferredAffinityCount (4)",
        two([((0, 1, 2, 3), F), ((0, 1), F)], [((2, 3), F)]),
        ((2, 3), F),
    ),
]

_FIVE = two([((0, 1, 2, 3), F), ((0, 1), F)], [((1, 2), F), ((2, 3), F)])
_SIX = two([((0, 1, 2, 3), F), ((0, 1), F)], [((1, 2, 3), F), ((1, 2), F), ((1, 3), F), ((2, 3), F)])

# (p *bestEffortPolicy) mergeTestCasesNoPolicies
NO_POLICIES: list[Case] = [
    ("bestNonPreferredAffinityCount (5)", _FIVE, ((1, 2), F)),
    ("bestNonPreferredAffinityCount (6)", _SIX, ((1, 2), F)),
]

# (p *bestEffortPolicy) mergeTestCasesClosestNUMA (eight nodes, prefer-closest-numa-nodes)
CLOSEST_NUMA: list[Case] = [
    (
        "Two providers, 2 hints each, same mask (some with different bits), same preferred",
        two([((0, 4), T), ((0, 2), T)], [((0, 4), T), ((0, 2), T)]),
        ((0, 2), T),
    ),
    (
        "Two providers, 2 hints each, different mask",
        two([((4,), T), ((0, 2), T)], [((4,), T), ((0, 2), T)]),
        ((4,), T),
    ),
    ("bestNonPreferredAffinityCount (5)", _FIVE, ((2, 3), F)),
    ("bestNonPreferredAffinityCount (6)", _SIX, ((2, 3), F)),
]

# (p *singleNumaNodePolicy) mergeTestCases
SINGLE_NUMA_NODE: list[Case] = [
    ("TopologyHint not set", [], (None, T)),
    ("HintProvider returns empty non-nil map[string][]TopologyHint", [{}], (None, T)),
    ("HintProvider returns -nil map[string][]TopologyHint from provider", [{"resource": None}], (None, T)),
    (
        "HintProvider returns empty non-nil map[string][]TopologyHint from provider",
        [{"resource": []}],
        (None, F),
    ),
    (
        "Single TopologyHint with Preferred as true and NUMANodeAffinity as nil",
        [{"resource": [(None, T)]}],
        (None, T),
    ),
    (
        "Single TopologyHint with Preferred as false and NUMANodeAffinity as nil",
        [{"resource": [(None, F)]}],
        (None, F),
    ),
    ("Two providers, 1 hint each, no common mask", two([((0,), T)], [((1,), T)]), (None, F)),
    (
        "Two providers, 1 hint each, same mask, 1 preferred, 1 not 1/2",
        two([((0,), T)], [((0,), F)]),
        (None, F),
    ),
    (
        "Two providers, 1 hint each, same mask, 1 preferred, 1 not 2/2",
        two([((1,), T)], [((1,), F)]),
        (None, F),
    ),
    (
        "Two providers, 1 with 2 hints, 1 with single non-preferred hint matching",
        two([((0,), T), ((1,), T)], [((0, 1), F)]),
        (None, F),
    ),
    (
        "Single NUMA hint generation",
        [{"resource1": [((0, 1), T)], "resource2": [((0,), T), ((1,), T), ((0, 1), F)]}],
        (None, F),
    ),
    (
        "One no-preference provider",
        [{"resource1": [((0,), T), ((1,), T), ((0, 1), F)]}, None],
        ((0,), T),
    ),
]

# commonNUMAInfoTwoNodes / FourNodes / EightNodes: distance rows by node id
TWO_NODES = {0: [10, 11], 1: [11, 10]}
FOUR_NODES = {0: [10, 11, 12, 12], 1: [11, 10, 12, 12], 2: [12, 12, 10, 11], 3: [12, 12, 11, 10]}
EIGHT_NODES = {
    0: [10, 11, 12, 12, 30, 30, 30, 30],
    1: [11, 10, 12, 12, 30, 30, 30, 30],
    2: [12, 12, 10, 11, 30, 30, 30, 30],
    3: [12, 12, 11, 10, 30, 30, 30, 30],
    4: [30, 30, 30, 30, 10, 11, 12, 12],
    5: [30, 30, 30, 30, 11, 10, 12, 12],
    6: [30, 30, 30, 30, 12, 12, 10, 11],
    7: [30, 30, 30, 30, 12, 12, 13, 10],
}

# TestCompareHintsNarrowest: (name, bestNonPreferredAffinityCount, current, candidate, expected winner)
COMPARE: list[tuple[str, int, Hint | None, Hint, str]] = [
    ("candidate.NUMANodeAffinity.Count() == 0 (1)", -1, None, ((), F), "current"),
    ("candidate.NUMANodeAffinity.Count() == 0 (2)", -1, ((), T), ((), F), "current"),
    ("current == nil (1)", -1, None, ((0,), T), "candidate"),
    ("current == nil (2)", -1, None, ((0,), F), "candidate"),
    ("!current.Preferred && candidate.Preferred", -1, ((0,), F), ((0,), T), "candidate"),
    ("current.Preferred && !candidate.Preferred", -1, ((0,), T), ((0,), F), "current"),
    ("current.Preferred && candidate.Preferred (1)", -1, ((0,), T), ((0,), T), "current"),
    ("current.Preferred && candidate.Preferred (2)", -1, ((0, 1), T), ((0,), T), "candidate"),
    ("current.Preferred && candidate.Preferred (3)", -1, ((0,), T), ((0, 1), T), "current"),
    ("!current.Preferred && !candidate.Preferred (1.1)", 1, ((0, 1), F), ((0, 1), F), "current"),
    ("!current.Preferred && !candidate.Preferred (1.2)", 1, ((1, 2), F), ((0, 1), F), "candidate"),
    ("!current.Preferred && !candidate.Preferred (1.3)", 1, ((0, 1), F), ((1, 2), F), "current"),
    ("!current.Preferred && !candidate.Preferred (2.1)", 2, ((0, 1), F), ((0,), F), "current"),
    ("!current.Preferred && !candidate.Preferred (2.2)", 2, ((0, 1), F), ((0, 1), F), "current"),
    ("!current.Preferred && !candidate.Preferred (2.3)", 2, ((1, 2), F), ((0, 1), F), "candidate"),
    ("!current.Preferred && !candidate.Preferred (2.4)", 2, ((0, 1), F), ((1, 2), F), "current"),
    ("!current.Preferred && !candidate.Preferred (3a)", 2, ((0,), F), ((0, 1, 2), F), "current"),
    ("!current.Preferred && !candidate.Preferred (3b)", 2, ((0,), F), ((0, 1), F), "candidate"),
    ("!current.Preferred && !candidate.Preferred (3ca.1)", 3, ((0,), F), ((0, 1), F), "candidate"),
    ("!current.Preferred && !candidate.Preferred (3ca.2)", 3, ((0,), F), ((1, 2), F), "candidate"),
    ("!current.Preferred && !candidate.Preferred (3ca.3)", 4, ((0, 1), F), ((1, 2, 3), F), "candidate"),
    ("!current.Preferred && !candidate.Preferred (3cb)", 4, ((1, 2, 3), F), ((0, 1), F), "current"),
    ("!current.Preferred && !candidate.Preferred (3cc.1)", 4, ((0, 1, 2), F), ((0, 1, 2), F), "current"),
    ("!current.Preferred && !candidate.Preferred (3cc.2)", 4, ((0, 1, 2), F), ((1, 2, 3), F), "current"),
    ("!current.Preferred && !candidate.Preferred (3cc.3)", 4, ((1, 2, 3), F), ((0, 1, 2), F), "candidate"),
]

# TestMaxOfMinAffinityCounts: (hints per resource, expected)
MAX_OF_MIN: list[tuple[list[list[Hint]], int]] = [
    ([], 0),
    ([[((), T)]], 0),
    ([[((0,), T)]], 1),
    ([[((0, 1), T)]], 2),
    ([[((0, 1), T), ((0, 1, 2), T)]], 2),
    ([[((0, 1), T), ((0, 1, 2), T)], [((0, 1, 2), T)]], 3),
    ([[((0, 1), T), ((0, 1, 2), T)], [((0, 1, 2), T), ((0, 1, 2, 3), T)]], 3),
]
