"""A chatty pod's log stays bounded under the agent's rotation, and its latest lines stay readable."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from agent.logs.reader import tail_lines
from harness.manifests import write_manifest
from tests.agent.support import Harness, wait_until


def test_a_chatty_pods_log_directory_stays_bounded(
    make_harness: Callable[..., Harness], manifests: Path
) -> None:
    harness = make_harness()
    harness.config.container_log_max_size = "64Ki"
    harness.config.container_log_max_files = 3
    harness.agent.log_manager.max_size = 64 * 1024
    harness.agent.log_manager.max_files = 3
    harness.agent.log_manager.interval = 0.1
    harness.start()
    chatty: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "chatty"},
        "spec": {
            "terminationGracePeriodSeconds": 1,
            "containers": [
                {"name": "main", "command": ["sh", "-c", "i=0; while :; do echo line-$$i; i=$$((i+1)); done"]}
            ],
        },
    }
    write_manifest(manifests, "chatty.yaml", json.dumps(chatty))
    item = harness.wait_phase("chatty", "Running")
    log = Path(item["status"]["containerStatuses"][0]["logPath"])
    wait_until(lambda: harness.agent.log_manager.rotations >= 3, 30, "three rotations")
    # Within max size x max files, plus what one check interval of writing adds (generously: 4 MiB).
    on_disk = sum(p.stat().st_blocks * 512 for p in log.parent.iterdir())
    assert on_disk < 3 * 64 * 1024 + 4 * 2**20, on_disk
    assert len([p for p in log.parent.iterdir() if p.name.startswith("0.log.")]) <= 2
    # The newest lines are whole and consecutive, across the rotated and the live file.
    last = tail_lines(log, 50).decode().splitlines()
    numbers = [int(line.removeprefix("line-")) for line in last[:-1]]  # the very last may still be written
    assert numbers == list(range(numbers[0], numbers[0] + len(numbers))) and len(numbers) >= 40
