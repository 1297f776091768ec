"""Helpers for the cgroup layer's tests: preconditions, pods, children placed in cgroups, file reads."""

from __future__ import annotations

import os
import subprocess
import sys
import uuid
from collections.abc import Sequence

import pytest

from agent.cm.cgroups.v1 import V1_CONTROLLERS
from agent.kuberuntime.processes import join_cgroup
from kubenode.cgroupsweep import V1_MOUNT
from kubenode.model import Container, Pod

MOUNT = V1_MOUNT
BUSY_LOOP = "while True: pass"


def require_root_and_v1() -> None:
    if os.geteuid() != 0:
        pytest.fail("the cgroup tests need root (they create cgroups under /sys/fs/cgroup)")
    missing = [name for name in V1_CONTROLLERS if not (MOUNT / name / "cgroup.procs").is_file()]
    if missing:
        pytest.fail(f"cgroup v1 controllers not mounted under {MOUNT}: {missing}")


def container(
    name: str = "c", requests: dict[str, int] | None = None, limits: dict[str, int] | None = None
) -> Container:
    return Container(name=name, command=("true",), requests=requests or {}, limits=limits or {})


def pod(*containers: Container, uid: str | None = None, init: Sequence[Container] = ()) -> Pod:
    return Pod(
        name="p",
        uid=uid or str(uuid.uuid4()),
        containers=containers or (container(),),
        init_containers=tuple(init),
    )


def guaranteed(milli_cpu: int, memory: int = 64 << 20, uid: str | None = None) -> Pod:
    resources = {"cpu": milli_cpu, "memory": memory}
    return pod(container(requests=resources, limits=resources), uid=uid)


def spawn_in(procs_files: list[str], code: str = BUSY_LOOP) -> subprocess.Popen[bytes]:
    """Start a Python child placed in the cgroup before it runs anything, as the runtime does."""

    return subprocess.Popen([sys.executable, "-c", code], preexec_fn=lambda: join_cgroup(procs_files))


def read(controller: str, cgroup: str, file: str) -> str:
    return (MOUNT / controller / cgroup.strip("/") / file).read_text().strip()
