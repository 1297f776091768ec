"""Which device controller to drive on this host: `enforcement()` answers "bpf" or "v1".

- cgroup v2 (`/sys/fs/cgroup` is a cgroup2 mount): a BPF device program per container cgroup (bpf.py).
- cgroup v1, hybrid hosts included (v1 hierarchies, possibly with a cgroup2 mount at
  /sys/fs/cgroup/unified, as on the project's 2-core machines): the v1 devices controller (v1.py).

Why v1 on a hybrid host, although a device program on the unified mount was seen to load and enforce
there (environment.md, and tests/devicecgroup/test_bpf.py does it): the agent's pod cgroups live in
the v1 hierarchies, and a program on the unified hierarchy only filters a process that is also in a
matching unified cgroup, which nothing makes today. Using it would mean a second tree of cgroups to
create, join, adopt and sweep for every container, for no extra protection: on a hybrid host the v1
devices controller is enforced for every process in the cgroup, and it is what runc and the kubelet
use there (runc picks its v1 manager unless /sys/fs/cgroup itself is cgroup2). Both at once would
only double the places that must agree.
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from agent.cm.cgroups.detect import CGROUP2_SUPER_MAGIC, CGROUP_MOUNT, filesystem_magic
from agent.cm.devicecgroup.v1 import DeviceCgroupError


def enforcement(mount: Path = CGROUP_MOUNT) -> Literal["bpf", "v1"]:
    if filesystem_magic(mount) == CGROUP2_SUPER_MAGIC:
        return "bpf"
    if (mount / "devices" / "devices.list").is_file():
        return "v1"
    raise DeviceCgroupError(
        0, f"{mount}: cgroup v1 without the devices controller mounted at {mount / 'devices'}: "
        "pods could open every device"
    )  # fmt: skip
