"""cgroup v2 device programs, for real: loaded with bpf(2) and attached to a fresh cgroup on this hybrid
host's unified mount (/sys/fs/cgroup/unified), with a child placed in it. The same checks run in the
cgroup v2 guest on a pure v2 kernel (tests/cgroup2_guest/guest_device_programs.py)."""

from __future__ import annotations

import errno
import os
from pathlib import Path

import pytest

from agent.cm.devicecgroup import bpf
from agent.cm.devicecgroup.bpfprog import ALU32_MOV_K, device_program, instruction
from agent.cm.devicecgroup.rules import DeviceRule, container_rules
from tests.devicecgroup.support import try_in_cgroup


def test_only_the_given_device_opens(unified_cgroup: Path, nodes: dict[str, Path]) -> None:
    bpf.replace_device_program(unified_cgroup, container_rules([(str(nodes["fuse"]), "rw")]))
    made = nodes["fuse"].parent / "made"
    paths = [str(nodes["fuse"]), str(nodes["loop"]), "/dev/null", f"mknod:{made}"]
    seen = try_in_cgroup(unified_cgroup / "cgroup.procs", paths)
    assert seen == {paths[0]: "ok", paths[1]: "EPERM", paths[2]: "ok", paths[3]: "EPERM"}
    assert len(bpf.attached_programs(unified_cgroup)) == 1


def test_replace_twice_leaves_exactly_one_program_with_the_new_rules(
    unified_cgroup: Path, nodes: dict[str, Path]
) -> None:
    bpf.replace_device_program(unified_cgroup, container_rules([(str(nodes["fuse"]), "rw")]))
    first = bpf.attached_programs(unified_cgroup)
    bpf.replace_device_program(unified_cgroup, container_rules([(str(nodes["loop"]), "rw")]))
    second = bpf.attached_programs(unified_cgroup)
    assert len(first) == len(second) == 1 and first != second
    seen = try_in_cgroup(unified_cgroup / "cgroup.procs", [str(nodes["fuse"]), str(nodes["loop"])])
    assert seen == {str(nodes["fuse"]): "EPERM", str(nodes["loop"]): "ok"}


def test_replace_removes_every_stray_program(unified_cgroup: Path, nodes: dict[str, Path]) -> None:
    """After a crash between attach and detach (or programs someone else left), one program remains."""
    fd = os.open(unified_cgroup, os.O_RDONLY | os.O_DIRECTORY)
    try:
        for _ in range(3):
            program = bpf.load_program(device_program(container_rules([])))
            bpf.attach(fd, program)
            os.close(program)
    finally:
        os.close(fd)
    assert len(bpf.attached_programs(unified_cgroup)) == 3
    bpf.replace_device_program(unified_cgroup, container_rules([(str(nodes["fuse"]), "r")]))
    assert len(bpf.attached_programs(unified_cgroup)) == 1
    seen = try_in_cgroup(unified_cgroup / "cgroup.procs", [str(nodes["fuse"])])
    assert seen == {str(nodes["fuse"]): "EPERM"}  # opened O_RDWR, the program granted r only


def test_a_program_the_verifier_refuses_is_reported_with_its_log() -> None:
    no_exit = instruction(ALU32_MOV_K, 0, imm=1)
    with pytest.raises(bpf.BpfError) as raised:
        bpf.load_program(no_exit)
    assert raised.value.errno == errno.EINVAL
    assert "BPF_PROG_LOAD (cgroup device program): Invalid argument; verifier log: " in str(raised.value)
    assert "last insn is not an exit or jmp | processed 0 insns" in str(raised.value)
    assert "\n" not in str(raised.value)


def test_a_missing_cgroup_is_named(tmp_path: Path) -> None:
    with pytest.raises(bpf.BpfError, match=f"cgroup {tmp_path}/gone: No such file or directory"):
        bpf.replace_device_program(tmp_path / "gone", [DeviceRule("c", 1, 3, "rwm")])


def test_a_directory_that_is_not_a_cgroup_is_named(tmp_path: Path) -> None:
    with pytest.raises(bpf.BpfError, match=f"cgroup {tmp_path}: BPF_PROG_QUERY"):
        bpf.replace_device_program(tmp_path, [DeviceRule("c", 1, 3, "rwm")])
