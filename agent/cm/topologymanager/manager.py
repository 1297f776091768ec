"""The Topology Manager (the kubelet's topologymanager/topology_manager.go NewManager and Admit).

`new_manager(policy, scope, options, nodes, sysfs_root)` checks the configuration as the kubelet
does (an unknown policy, scope or option, a bad option value, or more NUMA nodes than
max-allowable-numa-nodes under a policy other than none: TopologyManagerError with kube's message)
and returns a manager whose `admit(pod)` runs the scope. Hint providers (the device manager) are
added with `add_hint_provider`; `get_affinity` gives an admitted container's merged hint, the one
its devices are chosen with; `decisions` what each merge saw, for `kubenode trace`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from agent.cm.topologymanager.hints import AdmitResult, HintProvider, TopologyHint
from agent.cm.topologymanager.numainfo import NUMAInfo, NUMAInfoError, numa_info, sysfs_nodes
from agent.cm.topologymanager.options import PolicyOptionError, PolicyOptions, parse_policy_options
from agent.cm.topologymanager.policies import NONE, POLICIES, Policy
from agent.cm.topologymanager.scopes import CONTAINER, SCOPES, Decision, Scope
from kubenode.model import Pod


class TopologyManagerError(ValueError):
    pass


class TopologyManager:
    def __init__(self, policy: Policy, scope_name: str) -> None:
        self.policy = policy
        self.scope = Scope(scope_name, policy)

    @property
    def policy_name(self) -> str:
        return self.policy.name

    @property
    def scope_name(self) -> str:
        return self.scope.name

    @property
    def numa_nodes(self) -> tuple[int, ...]:
        return self.policy.numa_info.nodes

    def add_hint_provider(self, provider: HintProvider) -> None:
        self.scope.add_hint_provider(provider)

    def admit(self, pod: Pod) -> AdmitResult:
        return self.scope.admit(pod)

    def get_affinity(self, pod_uid: str, container: str) -> TopologyHint:
        return self.scope.get_affinity(pod_uid, container)

    def decisions(self, pod_uid: str) -> list[Decision]:
        return self.scope.decisions(pod_uid)

    def remove_pod(self, pod_uid: str) -> None:
        self.scope.remove_pod(pod_uid)

    def describe(self, pod_uid: str) -> dict[str, Any]:
        """The pod's merges for the agent's /pods and `kubenode trace`: per merge unit, each resource's
        hints ("no preference" for a resource without topology, [] when no placement is possible), the
        merged affinity and whether it was admitted."""
        decisions = []
        for decision in self.decisions(pod_uid):
            hints: dict[str, Any] = {}
            for provider_hints in decision.hints:
                for resource, resource_hints in sorted((provider_hints or {}).items()):
                    shown = None if resource_hints is None else [str(h) for h in resource_hints]
                    hints[resource] = "no preference" if shown is None else shown
            decisions.append(
                {
                    "container": decision.container or "(pod)",
                    "hints": hints,
                    "merged": str(decision.merged),
                    "admitted": decision.admitted,
                }
            )
        return {"policy": self.policy_name, "scope": self.scope_name, "decisions": decisions}


def new_manager(
    policy_name: str = NONE,
    scope_name: str = CONTAINER,
    options: Mapping[str, str] | None = None,
    nodes: Sequence[int] | None = None,
    sysfs_root: str | Path = "/sys",
) -> TopologyManager:
    """A manager for this machine (`nodes`, or those under sysfs); TopologyManagerError as the kubelet's."""
    if policy_name not in POLICIES:
        raise TopologyManagerError(f'unknown policy: "{policy_name}"')
    if scope_name not in SCOPES:
        raise TopologyManagerError(f'unknown scope: "{scope_name}"')
    try:
        parsed = parse_policy_options(options or {})
    except PolicyOptionError as err:
        raise TopologyManagerError(str(err)) from None
    node_ids = list(nodes) if nodes is not None else sysfs_nodes(sysfs_root)
    if policy_name == NONE:
        return TopologyManager(Policy(NONE, NUMAInfo(tuple(sorted(node_ids))), parsed), scope_name)
    try:
        info = numa_info(node_ids, sysfs_root, need_distances=parsed.prefer_closest_numa)
    except NUMAInfoError as err:
        raise TopologyManagerError(f"cannot discover NUMA topology: {err}") from None
    if len(info.nodes) > parsed.max_allowable_numa_nodes:
        raise TopologyManagerError(
            f"unsupported on machines with more than {parsed.max_allowable_numa_nodes} NUMA Nodes"
        )
    return TopologyManager(Policy(policy_name, info, parsed), scope_name)


__all__ = ["PolicyOptions", "TopologyManager", "TopologyManagerError", "new_manager"]
