"""A container the kernel's OOM killer ends is terminated with reason OOMKilled and exit code 137."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from agent.cm.cgroups.files import read_flat_key
from harness.manifests import write_manifest
from tests.agent.support import Harness


def test_a_pod_over_its_memory_limit_ends_oomkilled(
    make_harness: Callable[..., Harness], manifests: Path
) -> None:
    harness = make_harness().start()
    hog: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "hog"},
        "spec": {
            "restartPolicy": "Never",
            "containers": [
                {
                    "name": "main",
                    # 200 MiB of touched memory against a 32 MiB limit.
                    "command": ["python3", "-c", "x = b'a' * (200 << 20); print(len(x))"],
                    "resources": {"limits": {"memory": "32Mi", "cpu": "500m"}},
                }
            ],
        },
    }
    write_manifest(manifests, "hog.yaml", json.dumps(hog))
    item = harness.wait_phase("hog", "Failed", timeout=30)
    terminated = item["status"]["containerStatuses"][0]["state"]["terminated"]
    assert (terminated["reason"], terminated["exitCode"]) == ("OOMKilled", 137)
    # A container that exits on its own with an error is not mistaken for one the OOM killer ended
    # ($$$$ is kube's escape for the shell's $$).
    fails = {**hog, "metadata": {"name": "fails"}}
    fails["spec"] = {
        **hog["spec"],
        "containers": [{**hog["spec"]["containers"][0], "command": ["sh", "-c", "kill -9 $$$$"]}],
    }
    write_manifest(manifests, "fails.yaml", json.dumps(fails))
    item = harness.wait_phase("fails", "Failed", timeout=30)
    terminated = item["status"]["containerStatuses"][0]["state"]["terminated"]
    assert (terminated["reason"], terminated["exitCode"]) == ("Error", 137)


def test_oom_kill_counts_are_read_from_v1_and_v2_files(tmp_path: Path) -> None:
    (tmp_path / "memory.oom_control").write_text("oom_kill_disable 0\nunder_oom 0\noom_kill 3\n")
    (tmp_path / "memory.events").write_text("low 0\nhigh 0\nmax 12\noom 2\noom_kill 2\noom_group_kill 0\n")
    (tmp_path / "old.oom_control").write_text("oom_kill_disable 0\nunder_oom 0\n")  # before kernel 4.13
    assert read_flat_key(str(tmp_path), "memory.oom_control", "oom_kill") == 3
    assert read_flat_key(str(tmp_path), "memory.events", "oom_kill") == 2
    assert read_flat_key(str(tmp_path), "old.oom_control", "oom_kill") == 0
