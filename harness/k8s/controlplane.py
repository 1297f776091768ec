"""`ControlPlane`: the real Kubernetes v1.37 control plane (etcd, kube-apiserver, and optionally
kube-controller-manager and kube-scheduler) on loopback, for the interop tests.

    with ControlPlane() as cp:                       # temp dir, free ports; waits until each is healthy
        cp.url                                        # "https://127.0.0.1:PORT"
        cp.admin_kubeconfig, cp.ca_cert, cp.ca_key    # system:masters; the cluster CA (signs everything)
        cp.node_kubeconfig("n1")                      # CN=system:node:n1, O=system:nodes
        cp.kubeconfig_for("alice", ["devs"])          # any user
        cp.issue_cert("n1-serving", server_hosts=["127.0.0.1"])   # (crt, key) signed by the CA
        cp.kubectl("get", "nodes", "-o", "json")      # .venv/bin/kubectl with the admin kubeconfig
        cp.api("GET", "/api/v1/nodes")                # (status, decoded JSON) as admin, no kubectl
        cp.approve_csrs()                             # approve pending CSRs (kubelet-serving ones, ...)
        cp.create_namespace("t1")                     # and wait for its default ServiceAccount
        cp.restart("kube-apiserver"); cp.revive(); cp.logs("kube-apiserver")
        cp.start_seconds                              # {"etcd": 0.4, "kube-apiserver": 6.1, ...}

Every child is killed and the directory removed on exit, also when the start fails (the exception carries
the failing component's log tail). `auto_approve_serving=True` approves each node's own
`kubernetes.io/kubelet-serving` CSR as soon as it is posted (kube-controller-manager signs it with the cluster
CA; it approves only kubelet *client* CSRs by itself), so kubelets with `serverTLSBootstrap` and kubenode's
agent get a serving certificate that kube-apiserver's `--kubelet-certificate-authority` trusts.
"""

from __future__ import annotations

import contextlib
import functools
import json
import os
import shutil
import ssl
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Sequence
from pathlib import Path
from types import TracebackType
from typing import Any

from harness.k8s.binaries import ROOT, binary
from harness.k8s.etcd import Etcd
from harness.k8s.pki import CertificateAuthority, write_kubeconfig, write_rsa_key
from harness.k8s.process import ManagedProcess, free_port

KUBECTL = ROOT / ".venv" / "bin" / "kubectl"
SERVICE_CIDR = "10.0.0.0/24"  # never dialled: nothing routes it here (docs/interop.md)
COMPONENTS = ("etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler")


class ControlPlane:
    def __init__(
        self,
        *,
        scheduler: bool = True,
        controller_manager: bool = True,
        extra_apiserver_args: Sequence[str] = (),
        extra_scheduler_args: Sequence[str] = (),
        extra_controller_manager_args: Sequence[str] = (),
        auto_approve_serving: bool = True,
        start_timeout: float = 90.0,
        verbose: bool = True,
    ) -> None:
        self.want_scheduler = scheduler
        self.want_controller_manager = controller_manager
        self.extra_apiserver_args = list(extra_apiserver_args)
        self.extra_scheduler_args = list(extra_scheduler_args)
        self.extra_controller_manager_args = list(extra_controller_manager_args)
        self.auto_approve_serving = auto_approve_serving
        self.start_timeout = start_timeout
        self.verbose = verbose
        self.workdir = Path(tempfile.mkdtemp(prefix="kn-cp-", dir="/tmp"))
        self.pki_dir = self.workdir / "pki"
        self.log_dir = self.workdir / "logs"
        self.start_seconds: dict[str, float] = {}
        self.processes: dict[str, ManagedProcess] = {}
        self._secure_ports: dict[str, int] = {}
        self.etcd: Etcd | None = None
        self.port = free_port()
        self.url = f"https://127.0.0.1:{self.port}"
        self._approver_stop = threading.Event()
        self._approver: threading.Thread | None = None
        self._ssl: dict[Path, ssl.SSLContext] = {}
        self._identities: dict[Path, tuple[Path, Path]] = {}
        self.ca = CertificateAuthority.create(self.pki_dir)
        self.ca_cert, self.ca_key = self.ca.cert_path, self.ca.key_path
        self.sa_key, self.sa_pub = self.pki_dir / "sa.key", self.pki_dir / "sa.pub"
        self.admin_cert, self.admin_key = self.ca.issue(self.pki_dir, "kubernetes-admin", ["system:masters"])
        self.admin_kubeconfig = write_kubeconfig(
            self.workdir / "admin.kubeconfig", self.url, self.ca_cert, self.admin_cert, self.admin_key
        )

    # -- lifecycle ---------------------------------------------------------------------------------------

    def __enter__(self) -> ControlPlane:
        try:
            self.start()
        except BaseException:
            self.close()
            raise
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    def start(self) -> None:
        begun = time.monotonic()
        write_rsa_key(self.sa_key, self.sa_pub)
        self.etcd = Etcd(self.workdir / "etcd", self.log_dir)
        self.processes["etcd"] = self.etcd.process
        self.start_seconds["etcd"] = self.etcd.start(self.start_timeout)

        apiserver = self.processes["kube-apiserver"] = self._apiserver()
        apiserver.start()
        self.start_seconds["kube-apiserver"] = apiserver.wait_until(self._readyz, self.start_timeout, "ready")

        others = []
        if self.want_controller_manager:
            others.append(self._controller_manager())
        if self.want_scheduler:
            others.append(self._scheduler())
        for proc in others:  # in parallel: each waits only for the API server
            self.processes[proc.name] = proc
            proc.start()
        for proc in others:
            mark = time.monotonic()
            port = self._secure_ports[proc.name]
            proc.wait_until(functools.partial(_healthz, port), self.start_timeout, "healthy")
            self.start_seconds[proc.name] = time.monotonic() - mark
        if self.want_controller_manager:
            # Pods are refused until the namespace's default ServiceAccount exists (ServiceAccount admission).
            mark = time.monotonic()
            sa = "/api/v1/namespaces/default/serviceaccounts/default"
            self.wait_for(lambda: self.api("GET", sa)[0] == 200, self.start_timeout, "default ServiceAccount")
            self.start_seconds["default-serviceaccount"] = time.monotonic() - mark
        if self.auto_approve_serving:
            self._approver = threading.Thread(target=self._approve_loop, name="csr-approver", daemon=True)
            self._approver.start()
        self.start_seconds["total"] = time.monotonic() - begun
        if self.verbose:
            parts = ", ".join(f"{k} {v:.1f} s" for k, v in self.start_seconds.items())
            total = self.start_seconds["total"]
            print(f"control plane up at {self.url} in {total:.1f} s ({parts})", file=sys.stderr)

    def close(self) -> None:
        self._approver_stop.set()
        if self._approver is not None:
            self._approver.join(timeout=5)
        for name in reversed(list(self.processes)):
            try:
                self.processes[name].stop(grace=5)
            except Exception:
                self.processes[name].kill()
        shutil.rmtree(self.workdir, ignore_errors=True)

    def restart(self, component: str, grace: float = 2.0) -> float:
        """Stop one component (SIGTERM, SIGKILL after `grace` s) and start it again with the same flags and
        ports; seconds until it is healthy again. The grace is short on purpose: kube-apiserver drains its
        watches for a long time after SIGTERM while refusing new connections, and a scheduler or controller
        manager that cannot renew its leader lease within 10 s exits (as in any cluster, where its kubelet
        or systemd starts it again: `revive` does that here, and runs after every restart)."""
        proc = self.processes[component]
        proc.restart(grace)
        seconds = self._wait_healthy(component)
        self.revive()
        return seconds

    def revive(self) -> list[str]:
        """Start again every component that has exited (a lost leader election ends kube-scheduler and
        kube-controller-manager); the names started."""
        started = []
        for name, proc in self.processes.items():
            if not proc.alive():
                proc.start()
                self._wait_healthy(name)
                started.append(name)
        return started

    def _wait_healthy(self, component: str) -> float:
        proc = self.processes[component]
        if component == "etcd":
            assert self.etcd is not None
            return proc.wait_until(self.etcd.healthy, self.start_timeout, "healthy")
        if component == "kube-apiserver":
            return proc.wait_until(self._readyz, self.start_timeout, "ready")
        port = self._secure_ports[component]
        return proc.wait_until(lambda: _healthz(port), self.start_timeout, "healthy")

    def logs(self, component: str) -> str:
        return self.processes[component].log() if component in self.processes else ""

    def all_logs(self, lines: int = 80) -> str:
        """The tail of every component's log, for a failing test's report."""
        return "\n".join(f"===== {n} =====\n{p.log_tail(lines)}" for n, p in self.processes.items())

    def versions(self) -> dict[str, str]:
        """Each running component and its version (`--version`), for the compatibility matrix."""
        out: dict[str, str] = {}
        for name in self.processes:
            argv = [str(binary(name)), "--version"]
            text = subprocess.run(argv, capture_output=True, text=True, timeout=30).stdout
            out[name] = _version_word(text)
        return out

    # -- the components ----------------------------------------------------------------------------------

    def _apiserver(self) -> ManagedProcess:
        assert self.etcd is not None
        serving_crt, serving_key = self.ca.issue(
            self.pki_dir, "kube-apiserver", server_hosts=["127.0.0.1", "localhost", "10.0.0.1",
                                                          "kubernetes", "kubernetes.default",
                                                          "kubernetes.default.svc"],
            client=False,
        )  # fmt: skip
        kubelet_client_crt, kubelet_client_key = self.ca.issue(
            self.pki_dir, "kube-apiserver-kubelet-client", ["system:masters"]
        )
        args: list[str | os.PathLike[str]] = [
            binary("kube-apiserver"),
            "--etcd-servers", self.etcd.url,
            "--bind-address", "127.0.0.1",
            "--advertise-address", "127.0.0.1",
            "--secure-port", str(self.port),
            "--cert-dir", str(self.workdir / "apiserver-certs"),
            "--tls-cert-file", str(serving_crt),
            "--tls-private-key-file", str(serving_key),
            "--client-ca-file", str(self.ca_cert),
            # The front-proxy settings go to the extension-apiserver-authentication ConfigMap, which the
            # scheduler's and controller manager's delegated authentication read: without them both log
            # "missing content for CA bundle" many times a second. Only a certificate named
            # front-proxy-client (none is issued) could use the headers.
            "--requestheader-client-ca-file", str(self.ca_cert),
            "--requestheader-allowed-names", "front-proxy-client",
            "--requestheader-username-headers", "X-Remote-User",
            "--requestheader-group-headers", "X-Remote-Group",
            "--requestheader-extra-headers-prefix", "X-Remote-Extra-",
            "--service-account-issuer", self.url,
            "--service-account-key-file", str(self.sa_pub),
            "--service-account-signing-key-file", str(self.sa_key),
            "--authorization-mode", "Node,RBAC",
            "--enable-admission-plugins", "NodeRestriction",
            "--service-cluster-ip-range", SERVICE_CIDR,
            "--kubelet-client-certificate", str(kubelet_client_crt),
            "--kubelet-client-key", str(kubelet_client_key),
            "--kubelet-certificate-authority", str(self.ca_cert),
            "--kubelet-preferred-address-types", "InternalIP,Hostname",
            "--allow-privileged=true",
            "--profiling=false",
            # the `kubernetes` Service's Endpoints would name 127.0.0.1, which their validation refuses
            # (loopback); nothing here dials the Service anyway
            "--endpoint-reconciler-type", "none",
            *self.extra_apiserver_args,
        ]  # fmt: skip
        return ManagedProcess("kube-apiserver", args, self.log_dir)

    def _component_kubeconfig(self, user: str, stem: str) -> Path:
        crt, key = self.ca.issue(self.pki_dir, user, file_stem=stem)
        return write_kubeconfig(self.workdir / f"{stem}.kubeconfig", self.url, self.ca_cert, crt, key)

    def _controller_manager(self) -> ManagedProcess:
        kubeconfig = self._component_kubeconfig("system:kube-controller-manager", "kube-controller-manager")
        port = free_port()
        self._secure_ports["kube-controller-manager"] = port
        args: list[str | os.PathLike[str]] = [
            binary("kube-controller-manager"),
            "--kubeconfig", str(kubeconfig),
            "--authentication-kubeconfig", str(kubeconfig),
            "--authorization-kubeconfig", str(kubeconfig),
            "--bind-address", "127.0.0.1",
            "--secure-port", str(port),
            "--leader-elect=true",
            "--use-service-account-credentials=true",
            "--controllers", "*",
            "--service-account-private-key-file", str(self.sa_key),
            "--root-ca-file", str(self.ca_cert),
            "--cluster-signing-cert-file", str(self.ca_cert),
            "--cluster-signing-key-file", str(self.ca_key),
            "--service-cluster-ip-range", SERVICE_CIDR,
            "--profiling=false",
            *self.extra_controller_manager_args,
        ]  # fmt: skip
        return ManagedProcess("kube-controller-manager", args, self.log_dir)

    def _scheduler(self) -> ManagedProcess:
        kubeconfig = self._component_kubeconfig("system:kube-scheduler", "kube-scheduler")
        port = free_port()
        self._secure_ports["kube-scheduler"] = port
        args: list[str | os.PathLike[str]] = [
            binary("kube-scheduler"),
            "--kubeconfig", str(kubeconfig),
            "--authentication-kubeconfig", str(kubeconfig),
            "--authorization-kubeconfig", str(kubeconfig),
            "--bind-address", "127.0.0.1",
            "--secure-port", str(port),
            "--leader-elect=true",
            "--profiling=false",
            *self.extra_scheduler_args,
        ]  # fmt: skip
        return ManagedProcess("kube-scheduler", args, self.log_dir)

    # -- clients -----------------------------------------------------------------------------------------

    def ssl_context(self, kubeconfig: Path | None = None) -> ssl.SSLContext:
        """TLS as admin, or as the user of a kubeconfig this control plane wrote (kubeconfig_for)."""
        key = kubeconfig or self.admin_kubeconfig
        if key not in self._ssl:
            crt, private = self._identities.get(key, (self.admin_cert, self.admin_key))
            context = ssl.create_default_context(cafile=str(self.ca_cert))
            context.load_cert_chain(str(crt), str(private))
            self._ssl[key] = context
        return self._ssl[key]

    def _readyz(self) -> bool:
        return self.api("GET", "/readyz")[0] == 200

    def wait_ready(self, timeout: float = 60.0) -> None:
        """kube-apiserver's /readyz is 200 (and every other component still runs)."""
        self.wait_for(self._readyz, timeout, "kube-apiserver ready")
        for name, proc in self.processes.items():
            if not proc.alive():
                raise RuntimeError(f"{name} is not running:\n{proc.log_tail()}")

    def wait_for(self, condition: Any, timeout: float, what: str, interval: float = 0.2) -> None:
        deadline = time.monotonic() + timeout
        while True:
            try:
                if condition():
                    return
            except Exception:
                pass
            if time.monotonic() > deadline:
                raise TimeoutError(f"{what}: not within {timeout:.0f} s\n{self.all_logs(30)}")
            time.sleep(interval)

    def wait_pods_gone(self, node_name: str, timeout: float = 30.0) -> None:
        """Until no pod is bound to `node_name` (a kubelet confirms a pod's deletion once its containers are
        gone), or `timeout`: a teardown waits at most that long and goes on."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            status, body = self.api("GET", f"/api/v1/pods?fieldSelector=spec.nodeName={node_name}")
            if status != 200 or not body.get("items"):
                return
            time.sleep(0.3)

    def api(self, method: str, path: str, body: Any = None, *, content_type: str = "application/json",
            timeout: float = 10.0, kubeconfig: Path | None = None) -> tuple[int, Any]:  # fmt: skip
        """One request as admin (or as `kubeconfig`'s user, one of kubeconfig_for's): (status, decoded JSON
        body, or the text when it is not JSON). A PATCH's content type is the caller's to give."""
        data = None if body is None else (body if isinstance(body, bytes) else json.dumps(body).encode())
        request = urllib.request.Request(self.url + path, data=data, method=method)
        if data is not None:
            request.add_header("Content-Type", content_type)
        try:
            context = self.ssl_context(kubeconfig)
            with urllib.request.urlopen(request, timeout=timeout, context=context) as response:
                return response.status, _decode(response.read())
        except urllib.error.HTTPError as error:
            return error.code, _decode(error.read())

    def kubectl(
        self, *args: str, check: bool = True, input: str | None = None, timeout: float = 60.0,
        kubeconfig: Path | None = None,
    ) -> subprocess.CompletedProcess[str]:  # fmt: skip
        result = subprocess.run(
            [str(KUBECTL), "--kubeconfig", str(kubeconfig or self.admin_kubeconfig), *args],
            capture_output=True, text=True, input=input, timeout=timeout,
        )  # fmt: skip
        if check and result.returncode != 0:
            raise RuntimeError(
                f"kubectl {' '.join(args)} exited {result.returncode}:\n{result.stdout}\n{result.stderr}"
            )
        return result

    def apply(self, manifest: str) -> None:
        self.kubectl("apply", "-f", "-", input=manifest)

    # -- identities --------------------------------------------------------------------------------------

    def kubeconfig_for(self, user: str, groups: Sequence[str] = (), name: str | None = None) -> Path:
        stem = name or user.replace(":", "-")
        crt, key = self.ca.issue(self.pki_dir, user, groups, file_stem=stem)
        path = write_kubeconfig(self.workdir / f"{stem}.kubeconfig", self.url, self.ca_cert, crt, key)
        self._identities[path] = (crt, key)
        self._ssl.pop(path, None)
        return path

    def node_kubeconfig(self, node_name: str) -> Path:
        return self.kubeconfig_for(f"system:node:{node_name}", ["system:nodes"], f"node-{node_name}")

    def issue_cert(
        self, stem: str, common_name: str | None = None, groups: Sequence[str] = (),
        server_hosts: Sequence[str] = (),
    ) -> tuple[Path, Path]:  # fmt: skip
        """A certificate and key signed by the cluster CA, e.g. a kubelet's serving certificate
        (`tlsCertFile`/`tlsPrivateKeyFile`) that kube-apiserver's --kubelet-certificate-authority trusts."""
        return self.ca.issue(self.pki_dir, common_name or stem, groups, server_hosts=server_hosts,
                             file_stem=stem)  # fmt: skip

    # -- namespaces and CSRs -----------------------------------------------------------------------------

    def create_namespace(self, name: str, timeout: float = 30.0) -> None:
        """Create a namespace and wait for its `default` ServiceAccount (pods are refused until it exists)."""
        status, body = self.api("POST", "/api/v1/namespaces", {"metadata": {"name": name}})
        if status not in (201, 409):
            raise RuntimeError(f"creating namespace {name}: {status} {body}")
        if self.want_controller_manager:
            self.wait_for(
                lambda: self.api("GET", f"/api/v1/namespaces/{name}/serviceaccounts/default")[0] == 200,
                timeout, f"namespace {name}'s default ServiceAccount",
            )  # fmt: skip

    def approve_csrs(self, signer: str | None = None) -> list[str]:
        """Approve every pending CSR (of `signer` only, if given); the names approved."""
        status, body = self.api("GET", "/apis/certificates.k8s.io/v1/certificatesigningrequests")
        if status != 200:
            return []
        approved = []
        for csr in body.get("items", []):
            spec, conditions = csr["spec"], csr.get("status", {}).get("conditions") or []
            if conditions or (signer and spec.get("signerName") != signer):
                continue
            name = csr["metadata"]["name"]
            csr.setdefault("status", {})["conditions"] = [{
                "type": "Approved", "status": "True", "reason": "InteropHarness",
                "message": "approved by harness/k8s/controlplane.py",
            }]  # fmt: skip
            path = f"/apis/certificates.k8s.io/v1/certificatesigningrequests/{name}/approval"
            if self.api("PUT", path, csr)[0] == 200:
                approved.append(name)
        return approved

    def _approve_loop(self) -> None:
        while not self._approver_stop.wait(0.3):
            if not self.auto_approve_serving:  # a test may turn it off for a while
                continue
            with contextlib.suppress(Exception):  # the API server may be restarting
                self.approve_csrs("kubernetes.io/kubelet-serving")


def _decode(raw: bytes) -> Any:
    try:
        return json.loads(raw)
    except ValueError:
        return raw.decode(errors="replace")


def _healthz(port: int) -> bool:
    context = ssl.create_default_context()
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE  # the component's own self-signed serving certificate
    with urllib.request.urlopen(f"https://127.0.0.1:{port}/healthz", timeout=2, context=context) as response:
        return bool(response.status == 200)


def _version_word(text: str) -> str:
    for word in text.split():
        if word.startswith("v") and word[1:2].isdigit():
            return word
        if word[:1].isdigit() and "." in word:
            return "v" + word
    return text.strip()
