"""Pod and QoS cgroups for the node agent, as the kubelet's pod container manager makes them, and a process
pod's container cgroups below each pod cgroup, as runc makes them (`ensure_container`: the container's own
CPU, memory, pids and cpuset, and its device rules through agent/cm/devicecgroup/container.py).

Public API: `make_pod_cgroups` (manager.py), and from api.py the `PodCgroups` protocol, `ResourceConfig`,
`PodCgroupInfo` and `CgroupError`. Beyond the contract, the object `make_pod_cgroups` returns
(`manager.PodCgroupManager`) has `version` (1 or 2) and `backend`, and `read_limits` returns the
raw interface files plus normalised keys `cpu_quota` ("max" when unlimited), `cpu_period`,
`cpu_shares` (v1) or `cpu_weight` (v2), `memory_limit`, `pids_limit` and `cpuset`.

Modules, one job each:
- `api`: the contract types.
- `formulas`: MilliCPUToShares/Quota, the shares <-> weight conversion, ResourceConfigForPod and a
  container's config.
- `naming`: cgroupfs and systemd names for tiers, pods and containers; UID checks before any path is made.
- `validate`: value checks run before anything is written.
- `detect`: cgroup v1/v2 detection by statfs magic (a hybrid host is v1).
- `files`: interface file reads/writes, kernel errors -> CgroupError, pid and tree helpers.
- `backend`: the per-version operations the manager needs (`Hierarchies`).
- `v1`: cgroup v1 through its interface files, one hierarchy per controller.
- `v2`: cgroup v2 through its files, with an injectable mkdir/rmdir for tests on a plain tree.
- `manager`: QoS tiers, pod cgroups, listing, signalling and destroying, on one backend; the factory.

Thread safety: calls for different pods may run in parallel (pod workers); directory creation
is serialised inside the manager.
"""

from agent.cm.cgroups.api import CgroupError, PodCgroupInfo, PodCgroups, ResourceConfig
from agent.cm.cgroups.manager import make_pod_cgroups

__all__ = ["CgroupError", "PodCgroupInfo", "PodCgroups", "ResourceConfig", "make_pod_cgroups"]
