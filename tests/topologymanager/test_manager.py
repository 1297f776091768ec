"""NewManager and policy options as the kubelet checks them (topology_manager_test.go TestNewManager,
policy_options_test.go)."""

from __future__ import annotations

from pathlib import Path

import pytest

from agent.cm.topologymanager import TopologyManagerError, new_manager, parse_options_text
from agent.cm.topologymanager.options import PolicyOptionError, PolicyOptions, parse_policy_options


@pytest.mark.parametrize(
    ("policy", "expected"),
    [
        ("none", "none"),
        ("best-effort", "best-effort"),
        ("restricted", "restricted"),
        ("single-numa-node", "single-numa-node"),
    ],
)
def test_new_manager_policy(policy: str, expected: str) -> None:
    assert new_manager(policy, "container", {}, nodes=[0, 1]).policy_name == expected


@pytest.mark.parametrize(
    ("policy", "scope", "options", "message"),
    [
        ("unknown", "container", {}, 'unknown policy: "unknown"'),
        ("best-effort", "node", {}, 'unknown scope: "node"'),
        (
            "best-effort",
            "container",
            {"unknown-option": "true"},
            'unknown Topology Manager Policy option: "unknown-option"',
        ),
        (
            "restricted",
            "container",
            {"unknown-option": "true"},
            'unknown Topology Manager Policy option: "unknown-option"',
        ),
    ],
)
def test_new_manager_refuses(policy: str, scope: str, options: dict[str, str], message: str) -> None:
    with pytest.raises(TopologyManagerError, match=message):
        new_manager(policy, scope, options, nodes=[0, 1])


def test_more_than_8_numa_nodes_is_refused_unless_allowed(tmp_path: Path) -> None:
    nine = list(range(9))
    with pytest.raises(TopologyManagerError, match="unsupported on machines with more than 8 NUMA Nodes"):
        new_manager("best-effort", "container", {}, nodes=nine, sysfs_root=tmp_path)
    # The none policy never merges, so it does not care; max-allowable-numa-nodes raises the limit.
    assert new_manager("none", "container", {}, nodes=nine).numa_nodes == tuple(nine)
    allowed = new_manager(
        "single-numa-node", "pod", {"max-allowable-numa-nodes": "9"}, nodes=nine, sysfs_root=tmp_path
    )
    assert allowed.numa_nodes == tuple(nine)


def test_prefer_closest_needs_distances(tmp_path: Path) -> None:
    with pytest.raises(TopologyManagerError, match="cannot discover NUMA topology"):
        new_manager(
            "best-effort", "container", {"prefer-closest-numa-nodes": "true"}, nodes=[0], sysfs_root=tmp_path
        )


@pytest.mark.parametrize(
    ("options", "expected"),
    [
        ({}, PolicyOptions(False, 8)),
        ({"prefer-closest-numa-nodes": "true"}, PolicyOptions(True, 8)),
        ({"prefer-closest-numa-nodes": "False"}, PolicyOptions(False, 8)),
        ({"max-allowable-numa-nodes": "12"}, PolicyOptions(False, 12)),
    ],
)
def test_policy_options(options: dict[str, str], expected: PolicyOptions) -> None:
    assert parse_policy_options(options) == expected


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"prefer-closest-numa-nodes": "yes"}, 'bad value for option "prefer-closest-numa-nodes"'),
        ({"max-allowable-numa-nodes": "many"}, 'bad value for option "max-allowable-numa-nodes"'),
        (
            {"max-allowable-numa-nodes": "4"},
            'the minimum value of "max-allowable-numa-nodes" should not be less than 8',
        ),
        ({"bogus": "1"}, 'unknown Topology Manager Policy option: "bogus"'),
    ],
)
def test_policy_options_refused(options: dict[str, str], message: str) -> None:
    with pytest.raises(PolicyOptionError, match=message):
        parse_policy_options(options)


def test_options_text() -> None:
    assert parse_options_text("prefer-closest-numa-nodes=true, max-allowable-numa-nodes=9") == {
        "prefer-closest-numa-nodes": "true",
        "max-allowable-numa-nodes": "9",
    }
    assert parse_options_text("") == {}
    with pytest.raises(PolicyOptionError, match='invalid option "oops"'):
        parse_options_text("oops")
