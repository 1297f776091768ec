"""The cgroup v2 device filter: a BPF_PROG_TYPE_CGROUP_DEVICE program built from a rule list, as bytes.

Pure: `device_program(rules)` returns the instructions that `bpf.load_program` hands to the kernel. The
shape is runc's (opencontainers/cgroups devices/devicefilter.go, after crun's ebpf.c), instruction for
instruction (devices.md section 1), so its expected program for runc's default list is our test:

    prologue   r2 = type (ctx->access_type & 0xFFFF), r3 = access (access_type >> 16),
               r4 = major, r5 = minor            (struct bpf_cgroup_dev_ctx: u32 at 0, 4, 8)
    per rule   if r2 != TYPE goto next
               [w1 = w3; w1 &= ACC; if r1 != r3 goto next]   unless the rule grants rwm
               [if r4 != MAJOR goto next]                     unless major is *
               [if r5 != MINOR goto next]                     unless minor is *
               r0 = 1 (allow) or 0 (deny); exit
    epilogue   r0 = default; exit

The rules are first reduced by `rules.effective` (runc does the same with its emulator), so each
type:major:minor appears once, in runc's order, and only exceptions to the default are emitted. The
kernel answers EPERM to an open (or mknod) the program returns 0 for.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable

from agent.cm.devicecgroup.rules import WILDCARD, DeviceRule, effective

INSTRUCTION_SIZE = 8
LICENSE = "Apache"  # runc's; the kernel only needs a GPL-compatible string for GPL-only helpers (none used)

# Opcodes (linux/bpf.h, cilium/ebpf asm): class | operation | source.
LDX_MEM_W = 0x61  # BPF_LDX | BPF_MEM | BPF_W
ALU32_AND_K = 0x54
ALU32_RSH_K = 0x74
ALU32_MOV_X = 0xBC
ALU32_MOV_K = 0xB4
JMP_JNE_K = 0x55
JMP_JNE_X = 0x5D
JMP_EXIT = 0x95

# struct bpf_cgroup_dev_ctx and its encodings.
DEV_BLOCK, DEV_CHAR = 1, 2
ACC_MKNOD, ACC_READ, ACC_WRITE = 1, 2, 4
_ACCESS_BITS = {"m": ACC_MKNOD, "r": ACC_READ, "w": ACC_WRITE}
_TYPE_CODES = {"b": DEV_BLOCK, "c": DEV_CHAR}
R0, R1, R2, R3, R4, R5 = range(6)


def instruction(code: int, dst: int = 0, src: int = 0, off: int = 0, imm: int = 0) -> bytes:
    """struct bpf_insn: u8 code, u8 dst:4 src:4 (little-endian bitfields), s16 off, s32 imm."""
    return struct.pack("<BBhi", code, (src << 4) | dst, off, imm)


def _prologue() -> list[bytes]:
    return [
        instruction(LDX_MEM_W, R2, R1, 0),
        instruction(ALU32_AND_K, R2, imm=0xFFFF),
        instruction(LDX_MEM_W, R3, R1, 0),
        instruction(ALU32_RSH_K, R3, imm=16),
        instruction(LDX_MEM_W, R4, R1, 4),
        instruction(LDX_MEM_W, R5, R1, 8),
    ]


def _access_bits(access: str) -> int:
    bits = 0
    for ch in access:
        bits |= _ACCESS_BITS[ch]
    return bits


def _imm(number: int) -> int:
    """A u32 as the s32 immediate (runc's int32(); Linux majors and minors fit in 12 and 20 bits)."""
    return number - (1 << 32) if number >= 1 << 31 else number


def _block(rule: DeviceRule) -> list[bytes]:
    """One rule's block; each of its jumps goes to the first instruction after it (the next block)."""
    if rule.type not in _TYPE_CODES:
        raise ValueError(f"device rule {rule.line()}: only b and c rules become program blocks")
    bits = _access_bits(rule.access)
    # A jump is (code, dst, src, imm) until the block's length, and so its offset, is known.
    steps: list[bytes | tuple[int, int, int, int]] = [(JMP_JNE_K, R2, 0, _TYPE_CODES[rule.type])]
    if bits != ACC_MKNOD | ACC_READ | ACC_WRITE:
        # The requested access must be within the granted one: (r3 & bits) == r3, r1 as scratch.
        steps += [instruction(ALU32_MOV_X, R1, R3), instruction(ALU32_AND_K, R1, imm=bits)]
        steps.append((JMP_JNE_X, R1, R3, 0))
    if rule.major != WILDCARD:
        steps.append((JMP_JNE_K, R4, 0, _imm(rule.major)))
    if rule.minor != WILDCARD:
        steps.append((JMP_JNE_K, R5, 0, _imm(rule.minor)))
    steps += [instruction(ALU32_MOV_K, R0, imm=1 if rule.allow else 0), instruction(JMP_EXIT)]
    # A jump at index i lands on pc + 1 + off, which must be len(steps): the next block.
    return [
        step
        if isinstance(step, bytes)
        else instruction(step[0], step[1], step[2], len(steps) - i - 1, step[3])
        for i, step in enumerate(steps)
    ]


def device_program(rules: Iterable[DeviceRule]) -> bytes:
    """The program for `rules` applied to a cgroup that starts denying everything."""
    result = effective(rules)
    instructions = _prologue()
    for rule in result.exceptions:
        instructions += _block(rule)
    instructions.append(instruction(ALU32_MOV_K, R0, imm=1 if result.default_allow else 0))
    instructions.append(instruction(JMP_EXIT))
    return b"".join(instructions)
