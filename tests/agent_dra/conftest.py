"""Fixtures: kubenode's DRA driver serving real sockets on a fake sysfs, and the claims it reads."""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest

from deviceplugin.dra.driver import Driver, DriverOptions, discover
from deviceplugin.dra.inventory import CPU_DRIVER
from harness.fakesysfs import write_fake_cpus
from kubenode.model import Pod, parse_pod

SIBLINGS = {0: "0,2", 1: "1,3", 2: "0,2", 3: "1,3"}


class Claims:
    """Claims of `cpu.kubenode.io` devices on node-a, reserved for one pod, held in memory: these tests are
    about the agent's DRA manager and fix the claims' UIDs (the driver's reads of a real API server are
    tests/dradriver/test_driver.py's, the whole path tests/agent_cluster/test_dra.py's)."""

    def __init__(self) -> None:
        self.by_name: dict[tuple[str, str], Mapping[str, Any]] = {}
        self.reads = 0

    def put(self, obj: dict[str, Any]) -> None:
        self.by_name[(obj["metadata"]["namespace"], obj["metadata"]["name"])] = obj

    def get(self, namespace: str, name: str) -> Mapping[str, Any]:
        self.reads += 1
        try:
            return self.by_name[(namespace, name)]
        except KeyError:
            raise LookupError(f"resourceclaims {name!r} not found") from None

    def add(
        self, name: str, uid: str, devices: list[str], reserved_for: str = "pod-1", request: str = "cpus"
    ) -> None:
        results = [{"request": request, "driver": CPU_DRIVER, "pool": "node-a", "device": d} for d in devices]
        reserved = [{"resource": "pods", "name": "p", "uid": reserved_for}] if reserved_for else []
        self.put(
            {
                "metadata": {"name": name, "namespace": "default", "uid": uid},
                "status": {"allocation": {"devices": {"results": results}}, "reservedFor": reserved},
            }
        )


def claim_pod(uid: str = "pod-1", claims: tuple[str, ...] = ("cpus",)) -> Pod:
    return parse_pod(
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": "p", "namespace": "default", "uid": uid},
            "spec": {
                "resourceClaims": [{"name": c, "resourceClaimName": c} for c in claims],
                "containers": [
                    {
                        "name": "main",
                        "image": "x",
                        "command": ["sleep", "9"],
                        "resources": {"claims": [{"name": claims[0]}]},
                    },
                    {"name": "side", "image": "x", "command": ["sleep", "9"]},
                ],
            },
        }
    )


@pytest.fixture
def dirs() -> Iterator[Path]:
    path = Path(tempfile.mkdtemp(prefix="kn-adra-", dir="/tmp"))
    write_fake_cpus(path / "sys", SIBLINGS)
    yield path
    shutil.rmtree(path, ignore_errors=True)


@pytest.fixture
def claims() -> Claims:
    return Claims()


@pytest.fixture
def options(dirs: Path) -> DriverOptions:
    return DriverOptions(
        node_name="node-a",
        registry_dir=dirs / "registry",
        plugin_dir=dirs / "plugins",
        cdi_dir=dirs / "cdi",
        drivers=(CPU_DRIVER,),
        sysfs_root=str(dirs / "sys"),
        cdi_hook_path="/usr/bin/kubenode",
    )


@pytest.fixture
def driver(options: DriverOptions, claims: Claims) -> Iterator[Driver]:
    d = Driver(CPU_DRIVER, discover(options)[CPU_DRIVER], options, claims.get)
    d.serve()
    yield d
    d.stop()
