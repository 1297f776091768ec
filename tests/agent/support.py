"""Helpers for the agent's tests: preconditions, deadlines, manifests, and an in-process agent harness."""

from __future__ import annotations

import dataclasses
import os
import socket
import textwrap
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from agent.cm.cgroups import make_pod_cgroups
from agent.cm.cgroups.v1 import V1_CONTROLLERS
from agent.cm.devicemanager import DeviceManager
from agent.composition import compose_node
from agent.config.sources import ManifestSource
from agent.util.configobjects import NO_OBJECTS, ConfigObjects
from harness.manifests import fast_agent_config
from kubenode.cgroupsweep import V1_MOUNT, sweep_v1_root

MOUNT = V1_MOUNT


def require_cgroup_v1() -> None:
    """These tests run on the real cgroup v1 hierarchy; fail loudly (never skip) without it."""
    if os.geteuid() != 0:
        pytest.fail("agent cgroup tests need root (they create real pod cgroups)")
    missing = [c for c in V1_CONTROLLERS if not os.access(MOUNT / c / "cgroup.procs", os.W_OK)]
    if missing:
        pytest.fail(f"agent cgroup tests need writable cgroup v1 controllers; missing: {', '.join(missing)}")


def cgroup_dirs(root: str) -> list[str]:
    found: list[str] = []
    for controller in V1_CONTROLLERS:
        top = MOUNT / controller / root.strip("/")
        if top.exists():
            found.extend(current for current, _d, _f in os.walk(top))
    return found


def pod_cgroup_dirs(root: str) -> list[str]:
    return [d for d in cgroup_dirs(root) if os.path.basename(d).startswith("pod")]


def sweep(root: str) -> list[str]:
    """Kill what is left under the root in every hierarchy and remove it; returns what survived."""
    return sweep_v1_root(root)


def swept_cgroup_root(prefix: str) -> Iterator[str]:
    """The body of a `cgroup_root` fixture: a unique root /<prefix>-<random>, swept at teardown, a leak fails.

    The prefix names the suite, so a root left behind by a crashed run says which tests made it.
    """
    require_cgroup_v1()
    root = f"/{prefix}-{uuid.uuid4().hex[:10]}"
    yield root
    leftovers = sweep(root)
    assert not leftovers, f"cgroups leaked: {leftovers}"


def wait_until(predicate: Callable[[], Any], timeout: float, what: str, poll: float = 0.02) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() >= deadline:
            pytest.fail(f"timed out after {timeout} s waiting for {what}")
        time.sleep(poll)


def free_port() -> int:
    """A TCP port on 127.0.0.1 that was free a moment ago, for an agent's --listen."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def pod_manifest(
    name: str,
    command: str = "sleep 600",
    resources: str = "{}",
    *,
    restart_policy: str = "Always",
    grace: int = 30,
    extra_container: str = "",
) -> str:
    return textwrap.dedent(
        f"""\
        apiVersion: v1
        kind: Pod
        metadata: {{name: {name}}}
        spec:
          restartPolicy: {restart_policy}
          terminationGracePeriodSeconds: {grace}
          containers:
          - name: main
            command: [sh, -c, {command!r}]
            resources: {resources}
        """
    ) + textwrap.indent(textwrap.dedent(extra_container), "  ")


class Harness:
    """An in-process agent on a manifest dir, with fast loops; `stop()` terminates every pod."""

    def __init__(
        self,
        root: str,
        manifests: Path,
        state_dir: Path,
        *,
        devices: DeviceManager | None = None,
        allocatable: dict[str, int] | None = None,
        objects: ConfigObjects = NO_OBJECTS,
        dra: Any = None,
        **settings: Any,
    ) -> None:
        self.config = dataclasses.replace(fast_agent_config(root, manifests, state_dir), **settings)
        self.cgroups = make_pod_cgroups(root)
        self.source = ManifestSource(manifests, "testnode", rescan_interval=1.0)
        self.agent = compose_node(
            self.config,
            self.cgroups,
            [self.source],
            devices=devices,
            allocatable=allocatable,
            objects=objects,
            dra=dra,
        )
        self.started = False

    def start(self) -> Harness:
        self.agent.start()
        self.started = True
        return self

    def stop(self) -> None:
        if self.started:
            self.agent.stop(terminate_pods=True, timeout=20)
            self.cgroups.stop_and_remove_root()
            self.started = False

    def pod(self, name: str) -> dict[str, Any] | None:
        for item in self.agent.status_json()["items"]:
            if item["metadata"]["name"] == name:
                return dict(item)
        return None

    def wait_phase(self, name: str, phase: str, timeout: float = 10.0) -> dict[str, Any]:
        def check() -> dict[str, Any] | None:
            item = self.pod(name)
            return item if item and item["status"]["phase"] == phase else None

        result: dict[str, Any] = wait_until(check, timeout, f"pod {name} to be {phase}")
        return result

    def main_pid(self, name: str) -> int:
        item = self.wait_phase(name, "Running")
        return int(item["status"]["containerStatuses"][0]["pid"])
