"""The node lifecycle controller against the real API server: conditions become NoSchedule taints.

Units first (which taints a Node's conditions call for), then `kubenode controller-manager` as a
process with the API server's own controller-manager kubeconfig: it takes its Lease, taints a Node
whose conditions call for it, keeps the taints it does not own, and takes its taints off again.
"""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from cli.main import main
from controllers.nodelifecycle import NodeLifecycleController, condition_taints, desired_taints, taints_patch
from harness.apiserver import ApiServerProcess
from harness.controllermanager import ControllerManagerProcess
from kubenode.kubeclient import LEASES, NODES, PODS, Forbidden, KubeClient, load_kubeconfig
from kubenode.kubeclient.client import Resource
from tests.agent_cluster.support import events_for, wait_until
from tests.scheduler_live.support import SchedulerProcess
from tests.scheduler_live.support import node as scheduler_node
from tests.scheduler_live.support import pod as scheduler_pod

REPO = Path(__file__).resolve().parents[2]
CLUSTER_ROLES = Resource("clusterroles", "ClusterRole", group="rbac.authorization.k8s.io", namespaced=False)
DISK = "node.kubernetes.io/disk-pressure"
DISK_TAINT = (DISK, "NoSchedule")


def conditions(**statuses: str) -> list[dict[str, str]]:
    return [{"type": kind, "status": status} for kind, status in statuses.items()]


def node(name: str = "n1", taints: list[dict[str, Any]] | None = None, **statuses: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "resourceVersion": "7"},
        "spec": {"taints": taints or []},
        "status": {"conditions": conditions(**statuses)},
    }


def test_conditions_map_to_kubes_taint_keys() -> None:
    assert condition_taints(node(Ready="True", DiskPressure="False")) == []
    assert condition_taints(node(Ready="False")) == ["node.kubernetes.io/not-ready"]
    assert condition_taints(node(Ready="Unknown")) == ["node.kubernetes.io/unreachable"]
    assert condition_taints(
        node(Ready="True", MemoryPressure="True", DiskPressure="True", PIDPressure="True")
    ) == [
        "node.kubernetes.io/memory-pressure",
        DISK,
        "node.kubernetes.io/pid-pressure",
    ]
    unschedulable = {**node(Ready="True"), "spec": {"unschedulable": True}}
    assert condition_taints(unschedulable) == ["node.kubernetes.io/unschedulable"]


def test_only_owned_noschedule_taints_change() -> None:
    mine = {"key": "example.com/mine", "effect": "NoSchedule"}
    no_execute = {"key": DISK, "effect": "NoExecute"}  # not this pass's: NoSchedule only
    stale = {"key": "node.kubernetes.io/memory-pressure", "effect": "NoSchedule"}
    before = node(taints=[mine, stale, no_execute], Ready="True", DiskPressure="True")
    now = "2026-11-25T00:00:00Z"
    after = desired_taints(before, now)
    assert after == [mine, no_execute, {"key": DISK, "effect": "NoSchedule", "timeAdded": now}]
    settled = node(taints=after, Ready="True", DiskPressure="True")
    assert desired_taints(settled, "later") is None  # nothing to do: no PATCH
    assert taints_patch(before, after) == {"metadata": {"resourceVersion": "7"}, "spec": {"taints": after}}


@pytest.fixture(scope="module")
def api() -> Iterator[ApiServerProcess]:
    with ApiServerProcess() as server:
        yield server


@pytest.fixture(scope="module")
def admin(api: ApiServerProcess) -> Iterator[KubeClient]:
    client = KubeClient(load_kubeconfig(api.kubeconfig))
    yield client
    client.close()


@pytest.fixture  # only while its test runs: the other tests write taints themselves
def controller_manager(api: ApiServerProcess) -> Iterator[ControllerManagerProcess]:
    process = ControllerManagerProcess(api.data_dir / "controller-manager.kubeconfig")
    yield process
    assert process.close() == 0, process.output()


def set_conditions(admin: KubeClient, name: str, **statuses: str) -> None:
    admin.patch(NODES, name, {"status": {"conditions": conditions(**statuses)}}, subresource="status")


def taints_of(admin: KubeClient, name: str) -> list[dict[str, Any]]:
    return list(admin.get(NODES, name).get("spec", {}).get("taints") or [])


def keys(admin: KubeClient, name: str) -> list[tuple[str, str]]:
    return [(t["key"], t["effect"]) for t in taints_of(admin, name)]


def test_the_controller_manager_taints_by_condition(
    api: ApiServerProcess, admin: KubeClient, controller_manager: ControllerManagerProcess
) -> None:
    lease = wait_until(
        lambda: admin.get(LEASES, "kube-controller-manager", "kube-system")["spec"].get("holderIdentity"),
        30,
        "the controller manager's Lease",
    )
    assert lease
    mine = {"key": "example.com/mine", "value": "x", "effect": "NoSchedule"}
    admin.create(NODES, {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "pressed"},
                         "spec": {"taints": [mine]}})  # fmt: skip
    set_conditions(admin, "pressed", Ready="True", DiskPressure="True", MemoryPressure="False")
    wait_until(lambda: (DISK, "NoSchedule") in keys(admin, "pressed"), 30, "the disk-pressure taint")
    taints = taints_of(admin, "pressed")
    assert taints[0] == mine, "a taint the controller does not own keeps its place"
    assert taints[1]["timeAdded"]
    # kubectl shows it as kube's node lifecycle controller writes it.
    out = subprocess.run(
        [str(REPO / ".venv/bin/kubectl"), "--kubeconfig", str(api.kubeconfig), "get", "node", "pressed",
         "-o", "jsonpath={.spec.taints[*].key}"],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert out.returncode == 0 and out.stdout.split() == ["example.com/mine", DISK], out

    # Pressure ends: the taint goes; a cordon (spec.unschedulable) and Ready=False bring theirs.
    set_conditions(admin, "pressed", Ready="False", DiskPressure="False", MemoryPressure="False")
    admin.patch(NODES, "pressed", {"spec": {"unschedulable": True}})
    wanted = [
        ("example.com/mine", "NoSchedule"),
        ("node.kubernetes.io/not-ready", "NoSchedule"),
        ("node.kubernetes.io/unschedulable", "NoSchedule"),
    ]
    wait_until(lambda: sorted(keys(admin, "pressed")) == wanted, 30, f"taints {wanted}")
    set_conditions(admin, "pressed", Ready="True", DiskPressure="False", MemoryPressure="False")
    admin.patch(NODES, "pressed", {"spec": {"unschedulable": False}})
    wait_until(lambda: keys(admin, "pressed") == [("example.com/mine", "NoSchedule")], 30, "only mine left")


def test_its_user_may_make_pods_but_not_cluster_roles(api: ApiServerProcess) -> None:
    """kube's controller roles: the ReplicaSet controller makes pods; system:kube-controller-manager's own
    role lets its tokens controller write Secrets, but no controller writes RBAC objects."""
    client = KubeClient(load_kubeconfig(api.data_dir / "controller-manager.kubeconfig"))
    role = {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole", "metadata": {"name": "x"}}
    try:
        client.list(NODES)
        with pytest.raises(Forbidden):
            client.create(CLUSTER_ROLES, role)
    finally:
        client.close()


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--kubeconfig", "/nonexistent/kubeconfig"], "/nonexistent/kubeconfig"),
        (["--leader-elect=maybe"], "--leader-elect: want true or false, got 'maybe'"),
        (["--leader-elect-renew-deadline", "20"], "leaseDuration must be greater than renewDeadline"),
    ],
)
def test_bad_command_lines_are_one_line_and_exit_2(
    argv: list[str], message: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text("apiVersion: v1\nkind: Config\nclusters: []\nusers: []\ncontexts: []\n")
    full = ["controller-manager", "--kubeconfig", str(kubeconfig), *argv]
    assert main(full) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and message in err, err


def test_a_follower_takes_over_when_the_leader_stops(api: ApiServerProcess, admin: KubeClient) -> None:
    kubeconfig = api.data_dir / "controller-manager.kubeconfig"
    lease = ("--leader-elect-resource-name", "takeover")
    first = ControllerManagerProcess(kubeconfig, *lease)
    second: ControllerManagerProcess | None = None
    try:

        def holder() -> str:
            return str(admin.get(LEASES, "takeover", "kube-system")["spec"].get("holderIdentity") or "")

        leader = wait_until(holder, 30, "a leader")
        second = ControllerManagerProcess(kubeconfig, *lease)
        assert first.close() == 0, first.output()  # a clean stop releases the Lease
        wait_until(lambda: holder() not in ("", leader), 30, f"the follower to lead\n{second.output()}")
        follower = second
        wait_until(lambda: "started leading" in follower.output(), 30, "the follower's controllers to start")
    finally:
        first.close()
        if second is not None:
            assert second.close() == 0, second.output()


def test_a_stale_cache_conflicts_then_the_node_is_read_again(admin: KubeClient) -> None:
    """The PATCH carries the resourceVersion read: a Node changed since is not overwritten (409), but read
    again and patched on top of the change."""
    admin.create(NODES, {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "stale"}})
    set_conditions(admin, "stale", Ready="True", MemoryPressure="True")
    controller = NodeLifecycleController(admin)
    controller.nodes.start()
    try:
        wait_until(lambda: controller.nodes.get("stale"), 30, "the informer's copy with the conditions")
        wait_until(
            lambda: condition_taints(controller.nodes.get("stale") or {}), 30, "the conditions in the cache"
        )
    finally:
        controller.nodes.stop()
    mine = {"key": "example.com/added-meanwhile", "effect": "NoSchedule"}
    admin.patch(NODES, "stale", {"metadata": {"resourceVersion": None}, "spec": {"taints": [mine]}})
    assert controller.sync("stale") and controller.patches == 1
    assert keys(admin, "stale") == [
        ("example.com/added-meanwhile", "NoSchedule"),
        ("node.kubernetes.io/memory-pressure", "NoSchedule"),
    ]


def test_the_scheduler_keeps_pods_off_a_node_under_pressure(
    api: ApiServerProcess, admin: KubeClient, controller_manager: ControllerManagerProcess, tmp_path: Path
) -> None:
    """The chain kube has: a condition, the controller's taint, the scheduler's TaintToleration filter."""
    full = scheduler_node("full")
    admin.create(NODES, {k: v for k, v in full.items() if k != "status"})
    admin.patch(NODES, "full", {"status": full["status"]}, subresource="status")
    set_conditions(admin, "full", Ready="True", DiskPressure="True")
    wait_until(lambda: DISK_TAINT in keys(admin, "full"), 30, "the disk-pressure taint")
    scheduler = SchedulerProcess(api.data_dir / "scheduler.kubeconfig", log_path=tmp_path / "scheduler.log")
    try:
        admin.create(PODS, scheduler_pod("waits"), "default")
        failed = wait_until(
            lambda: events_for(admin, "waits", "FailedScheduling"), 60, "a FailedScheduling event"
        )
        assert "node(s) had untolerated taint" in failed[0]["message"], failed[0]["message"]
        set_conditions(admin, "full", Ready="True", DiskPressure="False")
        wait_until(
            lambda: admin.get(PODS, "waits", "default")["spec"].get("nodeName") == "full",
            60,
            f"the pod scheduled once the taint is gone\n{scheduler.log()}",
        )
    finally:
        assert scheduler.stop() == 0, scheduler.log()
