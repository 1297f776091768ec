"""A pod with a claim for one `cpu.kubenode.io` device runs pinned to exactly that CPU (real cgroups, a real
process, kubenode's driver on real sockets); its claim's CDI spec is gone once the pod is; a pod whose
claim is not reserved for it starts nothing and is retried."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from deviceplugin.dra.driver import Driver
from harness.manifests import write_manifest
from tests.agent.conftest import cgroup_root, make_harness, manifests  # noqa: F401  (fixtures)
from tests.agent.support import Harness, wait_until
from tests.agent_dra.conftest import Claims
from tests.agent_dra.test_manager import manager_for

POD = """\
apiVersion: v1
kind: Pod
metadata: {{name: {name}, uid: {uid}}}
spec:
  resourceClaims:
  - {{name: cpus, resourceClaimName: {claim}}}
  containers:
  - name: main
    command: [sh, -c, 'exec sleep 600']
    resources:
      claims: [{{name: cpus}}]
"""


def cpus_allowed(pid: int) -> str:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("Cpus_allowed_list:"):
            return line.split(":", 1)[1].strip()
    raise AssertionError(f"no Cpus_allowed_list for {pid}")


def test_claim_pod_runs_pinned_to_its_cpu(
    make_harness: Callable[..., Harness],  # noqa: F811
    manifests: Path,  # noqa: F811
    driver: Driver,
    claims: Claims,
    dirs: Path,
) -> None:
    dra = manager_for(driver, claims, dirs / "state")
    h = make_harness(dra=dra, cdi_spec_dirs=[str(dirs / "cdi")]).start()  # where the driver writes its specs
    claims.add("late", "uid-late", ["cpu-0"], reserved_for="someone-else")
    write_manifest(manifests, "late.yaml", POD.format(name="late", uid="pod-late", claim="late"))
    claims.add("one", "uid-one", ["cpu-1"], reserved_for="pod-one")
    path = write_manifest(manifests, "one.yaml", POD.format(name="one", uid="pod-one", claim="one"))
    pid = h.main_pid("one")
    assert cpus_allowed(pid) == "1"
    assert driver.state.specs.present() == ["uid-one"]
    # The other pod's claim is not reserved for it: no container, a retry that finds it reserved later.
    late = h.pod("late")
    assert late is not None and late["status"]["phase"] == "Pending"
    assert not any("running" in (c.get("state") or {}) for c in late["status"].get("containerStatuses") or [])
    claims.add("late", "uid-late", ["cpu-0"], reserved_for="pod-late")
    h.wait_phase("late", "Running", timeout=30)  # the workers' retry: the kubelet's 10 s backOffPeriod
    assert cpus_allowed(h.main_pid("late")) == "0"
    path.unlink()
    wait_until(lambda: h.pod("one") is None, 30, "the pod gone")
    wait_until(lambda: driver.state.specs.present() == ["uid-late"], 30, "its claim unprepared")
    assert dra.holders() == {"pod-late"}
