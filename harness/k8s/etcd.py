"""etcd 3.7 (built by `make k8s`) for one control plane: one member on free loopback ports, its data in the
given directory, fsync off (a test cluster: nothing survives the run anyway, and fsync on a loaded CI disk is
what makes kube-apiserver's writes slow)."""

from __future__ import annotations

import json
import urllib.request
from pathlib import Path

from harness.k8s.binaries import binary
from harness.k8s.process import ManagedProcess, free_port


class Etcd:
    def __init__(self, data_dir: Path, log_dir: Path) -> None:
        self.data_dir = data_dir
        self.client_port = free_port()
        self.peer_port = free_port()
        self.url = f"http://127.0.0.1:{self.client_port}"
        peer = f"http://127.0.0.1:{self.peer_port}"
        self.process = ManagedProcess(
            "etcd",
            [
                binary("etcd"),
                "--name", "interop",
                "--data-dir", str(data_dir),
                "--listen-client-urls", self.url,
                "--advertise-client-urls", self.url,
                "--listen-peer-urls", peer,
                "--initial-advertise-peer-urls", peer,
                "--initial-cluster", f"interop={peer}",
                "--unsafe-no-fsync",
                "--log-level", "warn",
            ],
            log_dir,
        )  # fmt: skip

    def healthy(self) -> bool:
        with urllib.request.urlopen(self.url + "/health", timeout=2) as response:
            return bool(json.loads(response.read()).get("health") == "true")

    def start(self, timeout: float = 30.0) -> float:
        self.process.start()
        return self.process.wait_until(self.healthy, timeout, "healthy")

    def stop(self) -> None:
        self.process.stop()
