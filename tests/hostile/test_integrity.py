"""A container never runs twice: a lost, unwritable or unreadable pod record must not start a second copy,
and bad state files never stop the agent from starting (issue 14 items 1 and 2)."""

from __future__ import annotations

import base64
import contextlib
import functools
import json
import os
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from agent.cm.devicemanager import DeviceManager
from agent.cm.devicemanager import checkpoint as checkpoint_file
from agent.volumemanager.mountutil import unmount_all_under
from harness.killcycles import copies
from harness.manifests import write_manifest
from tests.agent.support import Harness, pod_manifest, wait_until

REPO = Path(__file__).resolve().parents[2]


def restart(h: Harness, make_harness: Callable[..., Harness], state: Path) -> Harness:
    """Stop the agent leaving its pods running (as systemd's KillMode=process does), start a new one."""
    h.agent.stop(terminate_pods=False)
    h.started = False
    return make_harness(state).start()


def test_sigkill_during_start_20_times_leaves_one_copy_per_container(
    cgroup_root: str, short_dir: Path
) -> None:
    manifests, state = short_dir / "m", short_dir / "s"
    manifests.mkdir()
    try:
        figures = _kill_cycles(cgroup_root, manifests, state)
    finally:
        unmount_all_under(state)  # the last batch's volumes (its pods are swept with the cgroup root)
    print(f"kill cycles: {figures}")
    assert figures["agents_that_died_on_their_own"] == 0
    assert figures["pods_with_extra_copies"] == 0, figures
    assert figures["max_copies"] == figures["min_copies"] == 1, figures
    assert figures["stale_volume_dirs"] == figures["stale_mounts"] == 0, figures
    assert not os.path.lexists("/kn-hostile-volumes"), "a mountPath was made on the host"


def _kill_cycles(cgroup_root: str, manifests: Path, state: Path) -> dict[str, int]:
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "harness.killcycles",
            cgroup_root,
            str(manifests),
            str(state),
            "20",
            "6",
        ],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=100,
        env={**os.environ, "PYTHONPATH": str(REPO)},
    )
    assert result.returncode == 0, result.stderr[-3000:]
    figures: dict[str, int] = json.loads(result.stdout.strip().splitlines()[-1])
    return figures


@pytest.fixture
def small_tmpfs(short_dir: Path) -> Iterator[Path]:
    """A 512 KiB tmpfs for the state dir, so that it can be filled up; unmounted afterwards."""
    mount = short_dir / "state"
    mount.mkdir()
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=512k", "tmpfs", str(mount)], capture_output=True
    )
    if done.returncode != 0:
        pytest.fail(f"the full-disk test needs to mount a tmpfs (root): {done.stderr.decode().strip()}")
    yield mount
    subprocess.run(["umount", "-l", str(mount)], check=False)


def fill(directory: Path) -> Path:
    filler = directory / "filler"
    with open(filler, "wb", buffering=0) as out:
        for size in (65536, 4096, 1):  # down to the last byte
            with contextlib.suppress(OSError):
                while True:
                    out.write(b"\0" * size)
    return filler


def test_a_full_state_dir_surfaces_an_error_and_never_duplicates(
    make_harness: Callable[..., Harness], manifests: Path, small_tmpfs: Path, cgroup_root: str
) -> None:
    write_manifest(manifests, "web.yaml", pod_manifest("web"))
    h = make_harness(small_tmpfs).start()
    uid = h.wait_phase("web", "Running")["metadata"]["uid"]
    record_path = small_tmpfs / "pods" / f"{uid}.json"
    wait_until(record_path.exists, 5, "the record to be written")
    before = json.loads(record_path.read_text())
    filler = fill(small_tmpfs)

    def failed_write(h: Harness) -> dict[str, Any] | None:
        item = h.pod("web")
        return item if item and item["status"].get("reason") == "SyncError" else None

    for _ in range(3):  # each restart finds a disk where no record can be written
        h = restart(h, make_harness, small_tmpfs)
        item = wait_until(
            functools.partial(failed_write, h), 10, "the failed record write to show in the pod's status"
        )
        assert "No space left on device" in item["status"]["message"]
        assert copies(cgroup_root) == {uid: 1}
    assert json.loads(record_path.read_text()) == before  # the previous record is intact
    assert not [p.name for p in record_path.parent.iterdir() if p.name.startswith(".")]  # no temp files
    filler.unlink()


@pytest.mark.parametrize(
    "garbage",
    [b"[]", b'"x"', b"", b"\xff\xfe garbage", b'{"uid": 7}', None],
    ids=["list", "string", "empty", "bytes", "wrong-type", "truncated"],
)
def test_unusable_records_are_moved_aside_and_never_duplicate(
    make_harness: Callable[..., Harness],
    manifests: Path,
    tmp_path: Path,
    cgroup_root: str,
    garbage: bytes | None,
) -> None:
    write_manifest(manifests, "web.yaml", pod_manifest("web"))
    state = tmp_path / "state"
    h = make_harness(state).start()
    uid = h.wait_phase("web", "Running")["metadata"]["uid"]
    record_path = state / "pods" / f"{uid}.json"
    for _ in range(3):  # each restart once added another copy
        wait_until(record_path.exists, 5, "the record to be written")
        text = record_path.read_bytes()
        record_path.write_bytes(text[: len(text) // 2] if garbage is None else garbage)
        h = restart(h, make_harness, state)
        h.wait_phase("web", "Running")
        wait_until(lambda: copies(cgroup_root) == {uid: 1}, 5, "exactly one copy of the container")
        assert (state / "pods" / f"{uid}.json.bad").exists()
        wait_until(record_path.exists, 5, "the sync that adopted to write the record again")
        assert json.loads(record_path.read_text())["uid"] == uid
        assert copies(cgroup_root) == {uid: 1}


def test_a_checkpoint_whose_alloc_response_does_not_decode_is_set_aside(short_dir: Path) -> None:
    plugin_dir, state = short_dir / "plugins", short_dir / "state"
    data = {
        "entries": [
            {
                "podUID": "pod-1",
                "namespace": "default",
                "podName": "web",
                "container": "main",
                "resource": "example.com/dev",
                "deviceIDs": ["d0"],
                "numa": {},
                "allocResp": base64.b64encode(b"\xff\xff\xff\xff").decode(),
            }
        ],
        "registeredDevices": {"example.com/dev": ["d0"]},
    }
    state.mkdir()
    path = state / checkpoint_file.CHECKPOINT_NAME
    path.write_text(json.dumps({"version": 1, "data": data, "checksum": checkpoint_file._checksum(data)}))
    manager = DeviceManager(plugin_dir, state)
    manager.start()  # raised DecodeError
    try:
        assert manager.allocations() == []
        assert (state / f"{checkpoint_file.CHECKPOINT_NAME}.bad").exists()
    finally:
        manager.stop()
