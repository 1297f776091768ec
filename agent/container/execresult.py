"""A command run in a container's place (ExecSync): its result, and the runner a probe is bound to."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class ExecResult:
    exit_code: int  # 128+signal when killed by a signal, as for containers
    output: bytes
    timed_out: bool = False


# (command, timeout seconds) -> the command's result; bound by the manager to one container.
ExecRunner = Callable[[Sequence[str], float], ExecResult]
