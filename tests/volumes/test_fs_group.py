"""fsGroup: the pod's volumes belong to its group, as the kubelet's SetVolumeOwnership leaves them."""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

from harness.manifests import write_manifest
from tests.agent.support import Harness, wait_until


def test_a_non_root_pod_reads_its_owner_only_volume_through_its_fs_group(
    make_harness: Callable[..., Harness], manifests: Path, tmp_path: Path
) -> None:
    harness = make_harness().start()
    # Under /tmp, which uid 1000 may traverse (pytest's tmp_path is root's only); made in the pod's namespace.
    base = Path("/tmp") / f"kn-fsgroup-{uuid.uuid4().hex[:8]}"
    info, scratch = base / "info", base / "scratch"
    script = (
        f"cat {info}/name; echo; stat -c '%g %a' {info}/..data/name {scratch}; "
        f"touch {scratch}/made && stat -c '%g' {scratch}/made; echo done; sleep 1000"
    )
    body: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "grouped"},
        "spec": {
            "terminationGracePeriodSeconds": 1,
            "securityContext": {"runAsUser": 1000, "runAsGroup": 1000, "fsGroup": 2345},
            "volumes": [
                {
                    "name": "info",
                    "downwardAPI": {
                        "defaultMode": 0o400,  # the owner (root) only: the group bit is fsGroup's doing
                        "items": [{"path": "name", "fieldRef": {"fieldPath": "metadata.name"}}],
                    },
                },
                {"name": "scratch", "emptyDir": {}},
            ],
            "containers": [
                {
                    "name": "main",
                    "command": ["sh", "-c", script],
                    "volumeMounts": [
                        {"name": "info", "mountPath": str(info)},
                        {"name": "scratch", "mountPath": str(scratch)},
                    ],
                }
            ],
        },
    }
    write_manifest(manifests, "grouped.yaml", json.dumps(body))
    state = harness.config.state_dir

    def output() -> str:
        logs = list((state / "logs").glob("default_grouped_*/main/0.log"))
        text = logs[0].read_text() if logs else ""
        return text if "done" in text else ""

    lines = wait_until(output, 30, "the pod's output").splitlines()
    assert lines[0] == "grouped"  # read as uid 1000 through the group bit
    assert lines[1] == "2345 440"  # the file: the pod's group, group-readable
    assert lines[2] == "2345 2777"  # the emptyDir: the pod's group, setgid
    assert lines[3] == "2345"  # what the pod makes there keeps the group
    assert not base.exists()  # nothing was made on the host
