"""The real kube-scheduler and kube-controller-manager (v1.37, `make k8s`) with `kubenode apiserver` as their
only API server, for interop/tests/test_kube_control_plane_on_kubenode_apiserver.py.

    with KubeControlPlaneOnKubenode(controller_manager=False) as cp:
        cp.api                                  # the harness ApiServerProcess (cp.request: as admin)
        cp.scheduler.log()                      # a ManagedProcess each (cp.controller_manager when asked for)
        cp.wait_for_lease("kube-scheduler")     # the holder identity, once it holds kube-system/<name>

With KUBENODE_KUBE_ON_KUBENODE_LOGS=DIR the components' logs (and the apiserver's) are copied to DIR on close.

Each component runs with its defaults (protobuf content type, leader election through a Lease in
kube-system) and only these flags:
- `--kubeconfig`: a token kubeconfig for `system:kube-scheduler` / `system:kube-controller-manager`, so the
  bootstrap RBAC roles of those users are what it runs with;
- `--bind-address 127.0.0.1 --secure-port <free>`: its own HTTPS port on loopback (the defaults, 0.0.0.0:10259
  and :10257, would clash with the interop session's control plane and listen beyond loopback);
- kube-controller-manager also `--controllers` as given (default `*`) and
  `--use-service-account-credentials` spelled out: false (its default: every controller as
  system:kube-controller-manager), or true with `service_account_credentials=True` (kubeadm's choice: each
  controller as its ServiceAccount in kube-system, with kube's `system:controller:*` roles).
"""

from __future__ import annotations

import os
import shutil
import ssl
import tempfile
import time
import urllib.request
from collections.abc import Sequence
from pathlib import Path
from types import TracebackType
from typing import Any

from harness.apiserver import ApiServerProcess
from harness.k8s.binaries import binary
from harness.k8s.process import ManagedProcess, free_port

KEEP_LOGS_ENV = "KUBENODE_KUBE_ON_KUBENODE_LOGS"  # a directory: the logs are copied there on close
SCHEDULER_USER = "system:kube-scheduler"
CONTROLLER_MANAGER_USER = "system:kube-controller-manager"


class KubeControlPlaneOnKubenode:
    def __init__(
        self,
        *,
        scheduler: bool = True,
        controller_manager: bool = False,
        controllers: str = "*",
        service_account_credentials: bool = False,
        extra_controller_manager_args: Sequence[str] = (),
        apiserver_args: Sequence[str] = (),
    ) -> None:
        self._tmp = tempfile.TemporaryDirectory(prefix="kube-on-kubenode-")
        self.workdir = Path(self._tmp.name)
        self.log_dir = self.workdir / "logs"
        self.log_dir.mkdir()
        self.api: ApiServerProcess | None = None
        self.scheduler: ManagedProcess | None = None
        self.controller_manager: ManagedProcess | None = None
        self.want_scheduler = scheduler
        self.want_controller_manager = controller_manager
        self.controllers = controllers
        self.service_account_credentials = service_account_credentials
        self.extra_controller_manager_args = list(extra_controller_manager_args)
        self.apiserver_args = list(apiserver_args)
        self.ports: dict[str, int] = {}
        self.start_seconds: dict[str, float] = {}

    # -- lifecycle ------------------------------------------------------------------------------------------

    def __enter__(self) -> KubeControlPlaneOnKubenode:
        try:
            self.start()
        except BaseException:
            self.close()
            raise
        return self

    def __exit__(
        self, kind: type[BaseException] | None, value: BaseException | None, traceback: TracebackType | None
    ) -> None:
        self.close()

    def start(self) -> None:
        started = time.monotonic()
        self.api = ApiServerProcess(data_dir=self.workdir / "apiserver", args=self.apiserver_args)
        self.start_seconds["kubenode-apiserver"] = time.monotonic() - started
        if self.want_scheduler:
            self.scheduler = self._component("kube-scheduler", SCHEDULER_USER, [])
        if self.want_controller_manager:
            args = [
                "--controllers", self.controllers,
                f"--use-service-account-credentials={str(self.service_account_credentials).lower()}",
                *self.extra_controller_manager_args,
            ]  # fmt: skip
            self.controller_manager = self._component(
                "kube-controller-manager", CONTROLLER_MANAGER_USER, args
            )

    def _component(self, name: str, user: str, args: list[str]) -> ManagedProcess:
        assert self.api is not None
        kubeconfig = self.api.kubeconfig_for(user)
        port = free_port()
        self.ports[name] = port
        argv: list[str | os.PathLike[str]] = [
            binary(name),
            "--kubeconfig", str(kubeconfig),
            "--bind-address", "127.0.0.1",
            "--secure-port", str(port),
            "--v=2",
            *args,
        ]  # fmt: skip
        process = ManagedProcess(name, argv, self.log_dir)
        started = time.monotonic()
        process.start()
        process.wait_until(lambda: self._healthz(port), timeout=60, what="healthy")
        self.start_seconds[name] = time.monotonic() - started
        return process

    @staticmethod
    def _healthz(port: int) -> bool:
        context = ssl.create_default_context()
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE  # its serving certificate is self-signed, made at start
        with urllib.request.urlopen(f"https://127.0.0.1:{port}/healthz", timeout=2, context=context) as reply:
            return bool(reply.status == 200)

    def close(self) -> None:
        for process in (self.controller_manager, self.scheduler):
            if process is not None:
                process.stop()
        if self.api is not None:
            (self.log_dir / "kubenode-apiserver.log").write_text(self.api.log())
            self.api.close()
        keep = os.environ.get(KEEP_LOGS_ENV)
        if keep:  # the components' logs outlive the run, for reading by hand
            shutil.copytree(self.log_dir, keep, dirs_exist_ok=True)
        self._tmp.cleanup()

    # -- helpers --------------------------------------------------------------------------------------------

    def request(self, method: str, path: str, body: object = None) -> tuple[int, Any]:
        assert self.api is not None
        return self.api.request(method, path, body)

    def wait_for_lease(self, name: str, timeout: float = 60.0) -> str:
        """The holder of kube-system/<name> once one holds it."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            status, lease = self.request(
                "GET", f"/apis/coordination.k8s.io/v1/namespaces/kube-system/leases/{name}"
            )
            if status == 200 and (holder := (lease.get("spec") or {}).get("holderIdentity")):
                return str(holder)
            time.sleep(0.2)
        raise AssertionError(f"no holder of kube-system/{name} within {timeout} s:\n{self.logs()}")

    def logs(self, lines: int = 40) -> str:
        parts = []
        for process in (self.scheduler, self.controller_manager):
            if process is not None:
                parts.append(f"--- {process.name} ---\n{process.log_tail(lines)}")
        if self.api is not None:
            parts.append("--- kubenode apiserver ---\n" + "".join(self.api.output[-lines:]))
        return "\n".join(parts)
