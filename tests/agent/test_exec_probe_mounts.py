"""An exec probe runs where the container runs: in its mount namespace, so it sees the container's volumes."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from harness.manifests import write_manifest
from tests.agent.support import Harness, wait_until


def test_an_exec_probe_sees_the_containers_volume_mounts(
    make_harness: Callable[..., Harness], manifests: Path, tmp_path: Path
) -> None:
    harness = make_harness().start()
    mount = tmp_path / "not-on-the-host" / "scratch"  # exists only inside the container's namespace
    body: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "probed"},
        "spec": {
            "terminationGracePeriodSeconds": 1,
            "volumes": [{"name": "scratch", "emptyDir": {}}],
            "containers": [
                {
                    "name": "main",
                    "command": ["sh", "-c", f"touch {mount}/ready; sleep 1000"],
                    "volumeMounts": [{"name": "scratch", "mountPath": str(mount)}],
                    "readinessProbe": {
                        "exec": {"command": ["test", "-f", f"{mount}/ready"]},
                        "periodSeconds": 1,
                    },
                }
            ],
        },
    }
    write_manifest(manifests, "probed.yaml", json.dumps(body))

    def ready() -> bool:
        item = harness.pod("probed") or {}
        statuses = item.get("status", {}).get("containerStatuses") or [{}]
        return bool(statuses[0].get("ready"))

    wait_until(ready, 30, "the exec readiness probe to see the volume")
    assert not mount.exists()  # the host's view is unchanged
