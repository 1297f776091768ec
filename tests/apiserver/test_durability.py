"""Durability and faults with the real process: kill -9 during concurrent writes loses nothing
acknowledged, watchers resume after a restart, a second server on the same data dir is refused."""

from __future__ import annotations

import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from harness.apiserver import REPO, ApiServerProcess
from tests.apiserver.test_rest import PODS, pod
from tests.apiserver.test_watch import Stream, summary


def test_kill_during_concurrent_writes_loses_nothing_acknowledged() -> None:
    with ApiServerProcess() as api:
        acknowledged: list[str] = []
        lock = threading.Lock()
        killed = threading.Event()

        def write(i: int) -> None:
            if killed.is_set():
                return
            try:
                status, _ = api.request("POST", PODS, pod(f"k{i}"), timeout=10)
            except OSError:
                return  # the server died under this request: not acknowledged
            if status == 201:
                with lock:
                    acknowledged.append(f"k{i}")

        def killer() -> None:
            deadline = time.monotonic() + 30
            while len(acknowledged) < 200 and time.monotonic() < deadline:
                time.sleep(0.005)
            api.kill()
            killed.set()

        threading.Thread(target=killer, daemon=True).start()
        with ThreadPoolExecutor(16) as pool:
            list(pool.map(write, range(500)))
        assert killed.wait(30)
        assert 200 <= len(acknowledged) < 500  # killed while writes were in flight
        api.start()
        status, listed = api.request("GET", PODS)
        assert status == 200
        stored = {item["metadata"]["name"] for item in listed["items"]}
        missing = sorted(set(acknowledged) - stored)
        assert not missing, f"{len(missing)} acknowledged writes lost: {missing[:10]}"
        # Revisions go on increasing after the restart.
        last = max(int(item["metadata"]["resourceVersion"]) for item in listed["items"])
        status, new = api.request("POST", PODS, pod("after-restart"))
        assert status == 201 and int(new["metadata"]["resourceVersion"]) > last


def test_watch_resumes_across_a_restart() -> None:
    with ApiServerProcess() as api:
        _, first = api.request("POST", PODS, pod("before"))
        rv = first["metadata"]["resourceVersion"]
        api.request("POST", PODS, pod("during-1"))
        api.request("DELETE", PODS + "/before")
        api.kill()
        api.start()
        stream = Stream(api, f"resourceVersion={rv}&timeoutSeconds=10")
        api.request("POST", PODS, pod("after"))
        events: list[dict[str, Any]] = stream.wait_for(3)
        assert summary(events[:3]) == [("ADDED", "during-1"), ("DELETED", "before"), ("ADDED", "after")]
        stream.close()


def test_second_process_on_the_same_data_dir_is_refused() -> None:
    with ApiServerProcess() as api:
        second = subprocess.run(
            [
                sys.executable,
                "-m",
                "cli.main",
                "apiserver",
                "--data-dir",
                str(api.data_dir),
                "--port",
                "0",
            ],
            capture_output=True,
            text=True,
            timeout=60,
            cwd=REPO,
        )
        assert second.returncode == 1
        assert api.process is not None
        assert (
            f"data dir {api.data_dir} is in use by kubenode apiserver pid {api.process.pid}" in second.stderr
        )
        assert api.request("GET", "/readyz", token="")[0] == 200


def test_writer_death_refuses_writes_and_keeps_serving_reads() -> None:
    import psutil

    with ApiServerProcess() as api:
        assert api.request("POST", PODS, pod("before-writer-death"))[0] == 201
        assert api.process is not None
        (writer,) = [
            c
            for c in psutil.Process(api.process.pid).children()
            if "apiserver.storage.writer" in " ".join(c.cmdline())
        ]
        writer.kill()
        deadline = time.monotonic() + 10
        while (status := api.request("POST", PODS, pod("after-writer-death"))[0]) != 503:
            assert time.monotonic() < deadline, f"write answered {status}"
            time.sleep(0.1)
        assert api.request("GET", PODS + "/before-writer-death")[0] == 200
        assert api.request("GET", "/readyz", token="")[0] == 500


def test_sigterm_ends_open_watches_and_exits_zero() -> None:
    with ApiServerProcess() as api:
        stream = Stream(api, "resourceVersion=0")
        assert api.stop() == 0  # 0, not -9: it exited by itself before stop() gave up on it and killed it
        assert stream.ended.wait(30)
