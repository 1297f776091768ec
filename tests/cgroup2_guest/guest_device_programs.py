"""cgroup v2 device programs (agent/cm/devicecgroup/bpf.py) on a pure cgroup v2 kernel, where they are
the only device control there is. On the hybrid hosts the same code is tested on the unified mount
(tests/devicecgroup/test_bpf.py); here the cgroup is a plain child of /sys/fs/cgroup.

The guest's /dev is the host's view under virtme-ng, so the devices are ones every kernel has:
/dev/null (1:3), /dev/zero (1:5) and /dev/kmsg (1:11).
"""

from __future__ import annotations

from pathlib import Path

from agent.cm.devicecgroup import bpf
from agent.cm.devicecgroup.rules import ALLOW_ALL, DeviceRule, rule_for_device
from tests.cgroup2_guest.conftest import Transcript
from tests.cgroup2_guest.support import cgroup_dir
from tests.devicecgroup.support import try_in_cgroup

PATHS = ["/dev/null", "/dev/zero", "/dev/kmsg"]


def test_device_program_allows_exactly_its_rules_and_stays_one(v2_root: str, transcript: Transcript) -> None:
    cgroup = cgroup_dir(v2_root)
    cgroup.mkdir()
    procs = cgroup / "cgroup.procs"
    bpf.replace_device_program(cgroup, [ALLOW_ALL])
    assert try_in_cgroup(procs, PATHS) == dict.fromkeys(PATHS, "ok")  # the baseline: nothing else denies

    rules = [DeviceRule("c", 1, 3, "rwm"), rule_for_device("/dev/kmsg", "rw")]
    bpf.replace_device_program(cgroup, rules)
    assert try_in_cgroup(procs, PATHS) == {"/dev/null": "ok", "/dev/zero": "EPERM", "/dev/kmsg": "ok"}
    bpf.replace_device_program(cgroup, rules[:1])
    assert try_in_cgroup(procs, PATHS) == {"/dev/null": "ok", "/dev/zero": "EPERM", "/dev/kmsg": "EPERM"}
    programs = bpf.attached_programs(cgroup)
    assert len(programs) == 1
    transcript.line(
        f"device programs: {Path(cgroup).name}: one program (id {programs[0]}) after three replaces"
    )
