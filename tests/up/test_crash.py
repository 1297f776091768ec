"""After `kubenode up` crashes (SIGKILL), its daemons go with it, its pods keep running, and the next `up`
on the same data dir adopts them: the same processes, Running, and all gone after its Ctrl-C."""

from __future__ import annotations

import glob
import os
from pathlib import Path

from kubenode.kubeclient import PODS
from tests.agent.support import MOUNT, require_cgroup_v1, wait_until
from tests.up.support import UpProcess

POD = """\
apiVersion: v1
kind: Pod
metadata: {name: survivor}
spec:
  containers:
    - {name: main, image: busybox, command: [sleep, "600"]}
"""


def _pod_pids(root: str) -> set[int]:
    # The pod cgroups and their containers' cgroups below them.
    pattern = MOUNT / "pids" / root.strip("/") / "**" / "pod*" / "**" / "cgroup.procs"
    found = glob.glob(str(pattern), recursive=True)
    return {int(pid) for path in found for pid in Path(path).read_text().split()}


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return Path(f"/proc/{pid}/stat").read_text().split(")")[1].split()[0] != "Z"


def test_a_crashed_up_is_adopted_by_the_next(tmp_path: Path) -> None:
    require_cgroup_v1()
    manifest = tmp_path / "survivor.yaml"
    manifest.write_text(POD)
    with UpProcess(tmp_path) as up:  # survivor.yaml is the one manifest there: applied at start
        wait_until(lambda: "pod/survivor created" in up.log(), 10, "the pod applied")
        wait_until(
            lambda: up.client.get(PODS, "survivor", "default")["status"].get("phase") == "Running",
            30,
            "Running",
        )
        before = _pod_pids(up.root)
        assert before, "no process in the pod cgroup"
        daemons = [int(p.read_text()) for p in (up.data_dir / "up").glob("*.pid")]
        up.crash()
        wait_until(lambda: not any(_alive(pid) for pid in daemons), 30, "the daemons to end with up")
        assert all(_alive(pid) for pid in before), "the pod's processes must survive the crash"

        up.start()
        wait_until(lambda: "pod/survivor unchanged" in up.log(), 10, "the pod applied again, unchanged")
        pod = up.client.get(PODS, "survivor", "default")
        assert pod["status"]["phase"] == "Running"
        assert _pod_pids(up.root) == before, "adopted, not restarted"
        assert up.interrupt() == 0, up.log()
        assert not any(_alive(pid) for pid in before), "Ctrl-C leaves no pod process"
