"""The agent's DRA manager with kubenode's driver on real sockets: prepare before containers start, the CDI
IDs and CPUs it answers, the checkpoint across a restart (a kill between checkpoint and driver call), and
unprepare after the pod, retried when the driver was away."""

from __future__ import annotations

import json
from pathlib import Path
from typing import cast

import pytest

from agent.cm.cgroups import PodCgroups
from agent.cm.containermanager import ContainerManager
from agent.cm.dra.checkpoint import PREPARED, PREPARING, ClaimEntry, ClaimStore
from agent.cm.dra.errors import ClaimPrepareError
from agent.cm.dra.manager import DRAManager
from agent.cm.dra.plugins import ClaimRef, DriverClient, DriverRegistry
from deviceplugin.dra.driver import Driver
from deviceplugin.dra.inventory import CPU_DRIVER
from tests.agent_dra.conftest import Claims, claim_pod


def manager_for(driver: Driver, claims: Claims, state: Path, *, registered: bool = True) -> DRAManager:
    registry = DriverRegistry()
    if registered:
        registry.add(DriverClient(CPU_DRIVER, str(driver.dra_socket), "v1.DRAPlugin"))
    return DRAManager(ClaimStore(state), registry, claims.get)


def test_prepare_answers_cdi_ids_and_cpus_once(driver: Driver, claims: Claims, dirs: Path) -> None:
    claims.add("cpus", "uid-1", ["cpu-1", "cpu-3"])
    dra = manager_for(driver, claims, dirs / "state")
    pod = claim_pod()
    got = dra.prepare(pod)
    assert got.cpus == {1, 3}
    assert got.cdi_ids("main") == ["cpu.kubenode.io/claim=uid-1-cpu-1", "cpu.kubenode.io/claim=uid-1-cpu-3"]
    assert got.cdi_ids("side") == []
    assert [(d.claim, d.driver, d.pool, d.device) for d in got.containers["main"]] == [
        ("cpus", CPU_DRIVER, "node-a", "cpu-1"),
        ("cpus", CPU_DRIVER, "node-a", "cpu-3"),
    ]
    assert driver.state.specs.present() == ["uid-1"]
    # Synced again: the claim read again (reservation check), the driver not called again.
    driver_reads = claims.reads
    assert dra.prepare(pod).cdi_ids("main") == got.cdi_ids("main")
    assert claims.reads == driver_reads + 1
    assert dra.resources(pod).cpus == {1, 3}
    saved = json.loads((dirs / "state/dra_manager_state.json").read_text())
    assert saved["claims"]["uid-1"]["state"] == PREPARED and saved["claims"]["uid-1"]["pods"] == ["pod-1"]
    dra.unprepare("pod-1")
    assert driver.state.specs.present() == []
    assert json.loads((dirs / "state/dra_manager_state.json").read_text()) == {"claims": {}}


@pytest.mark.parametrize(
    ("reserved_for", "error"),
    [("someone-else", "is not reserved for the pod yet"), ("", "is not reserved for the pod yet")],
)
def test_a_claim_not_reserved_for_the_pod_starts_nothing(
    driver: Driver, claims: Claims, dirs: Path, reserved_for: str, error: str
) -> None:
    claims.add("cpus", "uid-1", ["cpu-1"], reserved_for=reserved_for)
    dra = manager_for(driver, claims, dirs / "state")
    with pytest.raises(ClaimPrepareError, match=error):
        dra.prepare(claim_pod())
    assert driver.state.specs.present() == []


def test_missing_claim_and_unregistered_driver(driver: Driver, claims: Claims, dirs: Path) -> None:
    dra = manager_for(driver, claims, dirs / "state", registered=False)
    with pytest.raises(ClaimPrepareError, match=r"reading ResourceClaim default/cpus: .*not found"):
        dra.prepare(claim_pod())
    claims.add("cpus", "uid-1", ["cpu-1"])
    with pytest.raises(ClaimPrepareError, match=r"DRA driver cpu\.kubenode\.io is not registered"):
        dra.prepare(claim_pod())
    # Checkpointed as preparing: the driver may have been asked, so the claim is not forgotten.
    assert dra.store.claims["uid-1"].state == PREPARING


def test_a_kill_between_checkpoint_and_prepare_prepares_once(
    driver: Driver, claims: Claims, dirs: Path
) -> None:
    """The agent wrote "preparing", the driver prepared, the agent died before writing "prepared": the
    restarted agent asks again and the driver (idempotent) answers the same; one spec, one claim."""
    claims.add("cpus", "uid-1", ["cpu-2"])
    driver.state.prepare("default", "uid-1", "cpus")
    store = ClaimStore(dirs / "state")
    store.claims["uid-1"] = ClaimEntry(ClaimRef("default", "cpus", "uid-1"), [CPU_DRIVER], {"pod-1"})
    store.save()
    dra = manager_for(driver, claims, dirs / "state")
    assert dra.prepare(claim_pod()).cpus == {2}
    assert driver.state.specs.present() == ["uid-1"]
    assert list(driver.state.prepared) == ["uid-1"]


def test_unprepare_waits_for_the_driver(driver: Driver, claims: Claims, dirs: Path) -> None:
    claims.add("cpus", "uid-1", ["cpu-0"])
    manager_for(driver, claims, dirs / "state").prepare(claim_pod())
    away = manager_for(driver, claims, dirs / "state", registered=False)  # restarted, driver not back yet
    with pytest.raises(ClaimPrepareError, match="not registered"):
        away.unprepare("pod-1")
    assert driver.state.specs.present() == ["uid-1"]
    away.registry.add(DriverClient(CPU_DRIVER, str(driver.dra_socket), "v1beta1.DRAPlugin"))
    away.retry_unprepare_quietly(CPU_DRIVER)
    assert driver.state.specs.present() == [] and away.store.claims == {}


def test_container_manager_pins_the_pod_and_adds_cdi_ids(driver: Driver, claims: Claims, dirs: Path) -> None:
    claims.add("cpus", "uid-1", ["cpu-3"])
    cm = ContainerManager(cast(PodCgroups, None), None, None, dra=manager_for(driver, claims, dirs / "state"))
    allocation = cm.allocate(claim_pod())
    assert allocation.cpuset == "3"
    assert allocation.with_devices == ("main",)
    assert allocation.resources["main"].cdi_devices == ["cpu.kubenode.io/claim=uid-1-cpu-3"]
    assert allocation.resources["side"].cdi_devices == []
    assert allocation.resources["side"].cpuset == "3"
    assert cm.resources_for(claim_pod(), "main").cdi_devices == ["cpu.kubenode.io/claim=uid-1-cpu-3"]
    assert cm.claim_holders() == {"pod-1"}  # housekeeping unprepares the claims of pods it no longer knows
    cm.unprepare_claims("pod-1")
    assert cm.claim_holders() == set()
    assert driver.state.specs.present() == []


def test_without_drivers_a_pod_with_claims_does_not_start() -> None:
    cm = ContainerManager(cast(PodCgroups, None), None, None)
    with pytest.raises(ClaimPrepareError, match="watches no DRA drivers"):
        cm.allocate(claim_pod())
