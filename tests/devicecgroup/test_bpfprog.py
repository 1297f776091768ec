"""The cgroup v2 device program, byte for byte against runc's expected programs (opencontainers/cgroups
devices/devicefilter_test.go: the built-in allow list, privileged, nothing), decoded to a listing."""

from __future__ import annotations

import struct

import pytest

from agent.cm.devicecgroup import bpfprog
from agent.cm.devicecgroup.rules import ALLOW_ALL, RUNC_ALLOWED_DEVICES, DeviceRule, DeviceRuleError

_NAMES = {
    0x61: "ldxw", 0x54: "and32", 0x74: "rsh32", 0xBC: "mov32x", 0xB4: "mov32",
    0x55: "jne", 0x5D: "jnex", 0x95: "exit",
}  # fmt: skip


def listing(program: bytes) -> list[str]:
    """One line per instruction: `pc name operands`, a jump's operand being its target pc."""
    assert len(program) % 8 == 0
    lines = []
    for pc in range(len(program) // 8):
        code, regs, off, imm = struct.unpack_from("<BBhi", program, pc * 8)
        dst, src, name = regs & 0xF, regs >> 4, _NAMES[code]
        text = {
            "ldxw": f"r{dst} r{src}+{off}",
            "mov32x": f"r{dst} r{src}",
            "jne": f"r{dst} {imm} ->{pc + 1 + off}",
            "jnex": f"r{dst} r{src} ->{pc + 1 + off}",
            "exit": "",
        }.get(name, f"r{dst} {imm}")
        lines.append(f"{pc} {name} {text}".strip())
    return lines


PROLOGUE = """
0 ldxw r2 r1+0
1 and32 r2 65535
2 ldxw r3 r1+0
3 rsh32 r3 16
4 ldxw r4 r1+4
5 ldxw r5 r1+8
"""


def _exact(pc: int, major: int, minor: int) -> str:
    """A c MAJOR:MINOR rwm allow block at pc (five instructions)."""
    end = pc + 5
    return (
        f"{pc} jne r2 2 ->{end}\n{pc + 1} jne r4 {major} ->{end}\n{pc + 2} jne r5 {minor} ->{end}\n"
        f"{pc + 3} mov32 r0 1\n{pc + 4} exit\n"
    )


# runc's expected program for its AllowedDevices: the emulator's order is (major, minor, type), so the
# two mknod wildcards come first, then 1:3 1:5 1:7 1:8 1:9 5:0 5:2 10:200, then 136:*.
RUNC_DEFAULT = (
    PROLOGUE
    + """
6 jne r2 1 ->12
7 mov32x r1 r3
8 and32 r1 1
9 jnex r1 r3 ->12
10 mov32 r0 1
11 exit
12 jne r2 2 ->18
13 mov32x r1 r3
14 and32 r1 1
15 jnex r1 r3 ->18
16 mov32 r0 1
17 exit
"""
    + "".join(
        _exact(pc, major, minor)
        for pc, (major, minor) in zip(
            range(18, 58, 5), [(1, 3), (1, 5), (1, 7), (1, 8), (1, 9), (5, 0), (5, 2), (10, 200)], strict=True
        )
    )
    + """
58 jne r2 2 ->62
59 jne r4 136 ->62
60 mov32 r0 1
61 exit
62 mov32 r0 0
63 exit
"""
)


def _lines(text: str) -> list[str]:
    return [line for line in text.strip().splitlines() if line]


def test_runc_default_allow_list_gives_runcs_program() -> None:
    program = bpfprog.device_program(RUNC_ALLOWED_DEVICES)
    assert listing(program) == _lines(RUNC_DEFAULT)
    assert len(program) == 64 * bpfprog.INSTRUCTION_SIZE


def test_no_rules_deny_everything() -> None:
    assert listing(bpfprog.device_program([])) == _lines(PROLOGUE + "6 mov32 r0 0\n7 exit")


def test_privileged_allows_everything() -> None:
    assert listing(bpfprog.device_program([ALLOW_ALL])) == _lines(PROLOGUE + "6 mov32 r0 1\n7 exit")


def test_allow_all_but_one_block_device_denies_it() -> None:
    rules = [ALLOW_ALL, DeviceRule("b", 8, 0, "rwm", allow=False)]
    expected = PROLOGUE + "6 jne r2 1 ->11\n7 jne r4 8 ->11\n8 jne r5 0 ->11\n9 mov32 r0 0\n10 exit\n"
    assert listing(bpfprog.device_program(rules)) == _lines(expected + "11 mov32 r0 1\n12 exit")


def test_partial_access_checks_the_request_is_within_it() -> None:
    program = bpfprog.device_program([DeviceRule("c", 195, 0, "rw")])
    assert listing(program)[6:] == [
        "6 jne r2 2 ->14",
        "7 mov32x r1 r3",
        "8 and32 r1 6",  # ACC_READ | ACC_WRITE
        "9 jnex r1 r3 ->14",
        "10 jne r4 195 ->14",
        "11 jne r5 0 ->14",
        "12 mov32 r0 1",
        "13 exit",
        "14 mov32 r0 0",
        "15 exit",
    ]


def test_a_repeated_device_is_one_block_with_the_union_of_its_access() -> None:
    once = bpfprog.device_program([DeviceRule("c", 195, 0, "rwm")])
    assert bpfprog.device_program([DeviceRule("c", 195, 0, "r"), DeviceRule("c", 195, 0, "wm")]) == once


def test_a_hole_in_a_wildcard_is_refused() -> None:
    with pytest.raises(
        DeviceRuleError, match=r"c 136:1 rwm would punch a hole in the wildcard rule c 136:\* rwm"
    ):
        bpfprog.device_program([DeviceRule("c", 136, -1, "rwm"), DeviceRule("c", 136, 1, "rwm", allow=False)])
