"""Pod and QoS cgroups for the node agent, as the kubelet's pod container manager makes them.

Public API (agent.cgroups.api): `make_pod_cgroups`, the `PodCgroups` protocol, `ResourceConfig`,
`PodCgroupInfo` and `CgroupError`.
"""

from agent.cgroups.api import CgroupError, PodCgroupInfo, PodCgroups, ResourceConfig, make_pod_cgroups

__all__ = ["CgroupError", "PodCgroupInfo", "PodCgroups", "ResourceConfig", "make_pod_cgroups"]
