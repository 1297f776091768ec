"""The container GC's policy (agent/kuberuntime/cri/gc.py) as the kubelet's kuberuntime_gc.go applies it."""

from __future__ import annotations

from agent.kuberuntime.cri import labels
from agent.kuberuntime.cri.gc import GCPolicy, dead_containers_to_remove, held_pods, sandboxes_to_remove
from kubenode.api.cri.v1 import api_pb2 as cri

NOW = 1_000_000 * 10**9


def container(
    ident: str,
    uid: str,
    name: str,
    attempt: int,
    *,
    running: bool = False,
    age_s: int = 100,
    sandbox: str = "",
) -> cri.Container:
    return cri.Container(
        id=ident,
        pod_sandbox_id=sandbox or f"sandbox-{uid}",
        metadata=cri.ContainerMetadata(name=name, attempt=attempt),
        state=cri.CONTAINER_RUNNING if running else cri.CONTAINER_EXITED,
        created_at=NOW - age_s * 10**9,
        labels={labels.POD_UID: uid, labels.CONTAINER_NAME: name},
    )


def removed(containers: list[cri.Container], policy: GCPolicy) -> list[str]:
    return [c.id for c in dead_containers_to_remove(containers, policy, NOW)]


def test_each_container_keeps_its_newest_dead_copy_by_default() -> None:
    copies = [container(f"a{n}", "p1", "main", n) for n in range(4)] + [
        container("a4", "p1", "main", 4, running=True),
        container("b0", "p1", "side", 0),
        container("c0", "p2", "main", 0),
    ]
    # Oldest first; the running one and each unit's newest dead copy stay.
    assert removed(copies, GCPolicy()) == ["a0", "a1", "a2"]
    assert removed(copies, GCPolicy(max_per_pod_container=2)) == ["a0", "a1"]
    assert removed(copies, GCPolicy(max_per_pod_container=-1)) == []
    assert removed(copies, GCPolicy(max_per_pod_container=0)) == ["a0", "a1", "a2", "a3", "b0", "c0"]


def test_min_age_spares_young_dead_containers() -> None:
    copies = [container("old", "p1", "main", 0, age_s=600), container("new", "p1", "main", 1, age_s=5)]
    assert removed(copies, GCPolicy(max_per_pod_container=0, min_age_s=60)) == ["old"]


def test_max_containers_cuts_each_unit_to_a_share_then_the_oldest_overall() -> None:
    copies = [container(f"a{n}", "p1", "main", n, age_s=100 - n) for n in range(3)] + [
        container(f"b{n}", "p2", "main", n, age_s=50 - n) for n in range(3)
    ]
    unlimited = GCPolicy(max_per_pod_container=-1, max_containers=4)
    assert sorted(removed(copies, unlimited)) == ["a0", "b0"]  # a share of 2 per unit
    one = GCPolicy(max_per_pod_container=-1, max_containers=1)
    # A share of at least one per unit leaves a2 and b2; then the older of them (a2) goes too.
    assert sorted(removed(copies, one)) == ["a0", "a1", "a2", "b0", "b1"]


def test_sandboxes_not_ready_and_empty_go_except_each_pods_newest() -> None:
    def sandbox(ident: str, uid: str, attempt: int, ready: bool) -> cri.PodSandbox:
        return cri.PodSandbox(
            id=ident,
            metadata=cri.PodSandboxMetadata(uid=uid, attempt=attempt),
            state=cri.SANDBOX_READY if ready else cri.SANDBOX_NOTREADY,
            labels={labels.POD_UID: uid},
        )

    sandboxes = [
        sandbox("s0", "p1", 0, False),
        sandbox("s1", "p1", 1, False),  # holds a container: stays
        sandbox("s2", "p1", 2, True),
        sandbox("t0", "p2", 0, False),  # p2's newest: stays
    ]
    holding = [container("c", "p1", "main", 0, sandbox="s1")]
    assert [s.id for s in sandboxes_to_remove(sandboxes, holding)] == ["s0"]
    assert held_pods(sandboxes, [container("x", "p3", "main", 0)]) == {"p1", "p2", "p3"}


def test_a_pass_removes_without_stopping_and_goes_on_past_a_failure() -> None:
    from agent.kuberuntime.cri.client import CRIError
    from agent.kuberuntime.cri.gc import ContainerGC

    removed: list[str] = []

    def remove_container(c: cri.Container) -> None:
        if c.id == "a0":
            raise CRIError("rpc error: code = UNKNOWN desc = container is being started")
        removed.append(c.id)

    gc = ContainerGC(remove_container, removed.append, clock=lambda: 1000.0)
    assert gc.due()
    copies = [container(f"a{n}", "p1", "main", n) for n in range(3)]
    old, new = (
        cri.PodSandbox(
            id=f"s-{name}", metadata=cri.PodSandboxMetadata(uid="p1", attempt=n), state=cri.SANDBOX_NOTREADY
        )
        for n, name in enumerate(("old", "new"))
    )
    assert gc.collect(copies, [old, new]) == 2  # a1 and the old empty sandbox; a0 failed
    assert removed == ["a1", "s-old"]
    assert not gc.due()  # a minute until the next pass
