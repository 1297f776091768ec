"""`kubenode dra-driver`'s composition root: config -> drivers -> their sockets and slices.

For each driver (`cpu.kubenode.io`; `gpu.kubenode.io` where NVML or the config has GPUs): its devices
(inventory.py), its prepared claims (their CDI specs, service.py and claimspecs.py), the
DRA socket `<plugin-dir>/<driver>/dra.sock` serving v1 and v1beta1, the registration socket
`<registry-dir>/<driver>-reg.sock` (registration.py) and the ResourceSlice publisher (slices.py). A
background loop republishes slices that failed (an API server without resource.k8s.io/v1 yet, a
transient error) and puts a registration socket back when the registry directory was recreated (the
kubelet's plugin watcher then registers the driver again). Stop: sockets closed and removed, slices kept
(a restarted driver finds them; prepared claims stay prepared).
"""

from __future__ import annotations

import logging
import os
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import grpc

from deviceplugin.dra.claimspecs import ClaimSpecs
from deviceplugin.dra.inventory import (
    CPU_DRIVER,
    DRIVERS,
    GPU_DRIVER,
    DraDevice,
    cpu_devices,
    gpu_devices,
    nvml_gpus,
    static_gpus,
)
from deviceplugin.dra.registration import RegistrationServicer
from deviceplugin.dra.service import SERVICE_VERSIONS, ClaimGetter, DriverState, add_dra_services
from deviceplugin.dra.slices import SlicePublisher
from deviceplugin.hookcommand import hook_command
from kubenode.api.pluginregistration.v1 import api_pb2_grpc as reg_grpc
from kubenode.kubeclient import RESOURCE_CLAIMS, KubeClient
from kubenode.kubeclient.errors import KubeError
from kubenode.stopsignal import wait_for_stop

log = logging.getLogger(__name__)

RETRY_S = 5.0  # slices that failed to publish are tried again this often
SOCKET_CHECK_S = 0.5  # how soon a removed registration socket is served again


@dataclass
class DriverOptions:
    node_name: str
    registry_dir: Path
    plugin_dir: Path
    cdi_dir: Path = Path("/var/run/cdi")
    drivers: tuple[str, ...] = ()  # empty: every driver that applies
    gpus: list[dict[str, Any]] | None = None  # static GPUs; None: from NVML
    sysfs_root: str = "/sys"
    dev_root: str = "/dev"
    cdi_hook_path: str | None = None


def load_options(path: str | None, base: DriverOptions) -> DriverOptions:
    """`--config` YAML: drivers, gpus, sysfsRoot, devRoot, cdiHookPath; an unknown key is an error."""
    if not path:
        return base
    from kubenode import yamlload

    data = yamlload.load(Path(path).read_text()) or {}
    if not isinstance(data, dict):
        raise ValueError(f"{path}: expected a mapping")
    known = {"drivers", "gpus", "sysfsRoot", "devRoot", "cdiHookPath"}
    unknown = sorted(set(data) - known)
    if unknown:
        raise ValueError(f"{path}: unknown field {unknown[0]!r} (known: {', '.join(sorted(known))})")
    drivers = tuple(str(d) for d in data.get("drivers") or ())
    for d in drivers:
        if d not in DRIVERS:
            raise ValueError(f"{path}: drivers: {d!r} is not one of {', '.join(DRIVERS)}")
    base.drivers = drivers or base.drivers
    base.gpus = data.get("gpus", base.gpus)
    base.sysfs_root = str(data.get("sysfsRoot", base.sysfs_root))
    base.dev_root = str(data.get("devRoot", base.dev_root))
    base.cdi_hook_path = data.get("cdiHookPath", base.cdi_hook_path)
    return base


def discover(options: DriverOptions) -> dict[str, list[DraDevice]]:
    """Each driver that applies, with its devices (GPU: only with GPUs, unless named in `drivers`)."""
    wanted = options.drivers or DRIVERS
    found: dict[str, list[DraDevice]] = {}
    if CPU_DRIVER in wanted:
        found[CPU_DRIVER] = cpu_devices(hook_command(options.cdi_hook_path), options.sysfs_root)
    if GPU_DRIVER in wanted:
        gpus = static_gpus(options.gpus, "config") if options.gpus is not None else nvml_gpus()
        if gpus or GPU_DRIVER in options.drivers:
            found[GPU_DRIVER] = gpu_devices(gpus, options.dev_root)
    return found


class Driver:
    """One driver's sockets, state and slice."""

    def __init__(
        self, name: str, devices: list[DraDevice], options: DriverOptions, get_claim: ClaimGetter
    ) -> None:
        self.name = name
        self.devices = devices
        self.dir = options.plugin_dir / name
        self.dra_socket = self.dir / "dra.sock"
        self.reg_socket = options.registry_dir / f"{name}-reg.sock"
        self.state = DriverState(name, devices, ClaimSpecs(options.cdi_dir, name), get_claim)
        self.registration = RegistrationServicer(name, str(self.dra_socket), SERVICE_VERSIONS)
        self._dra_server: grpc.Server | None = None
        self._reg_server: grpc.Server | None = None

    def serve(self) -> None:
        self.dir.mkdir(parents=True, exist_ok=True)
        self.dra_socket.unlink(missing_ok=True)
        server = grpc.server(ThreadPoolExecutor(max_workers=4, thread_name_prefix=f"{self.name}-dra"))
        add_dra_services(server, self.state)
        server.add_insecure_port(f"unix://{self.dra_socket}")
        server.start()
        self._dra_server = server
        self.serve_registration()

    def serve_registration(self) -> None:
        """(Re)create the registration socket; the DRA socket must serve first (the kubelet dials it)."""
        if self._reg_server is not None:
            self._reg_server.stop(None)
        self.reg_socket.parent.mkdir(parents=True, exist_ok=True)
        self.reg_socket.unlink(missing_ok=True)
        server = grpc.server(ThreadPoolExecutor(max_workers=2, thread_name_prefix=f"{self.name}-reg"))
        reg_grpc.add_RegistrationServicer_to_server(self.registration, server)
        server.add_insecure_port(f"unix://{self.reg_socket}")
        server.start()
        self._reg_server = server
        log.info(
            "driver %s: registration socket %s, DRA socket %s", self.name, self.reg_socket, self.dra_socket
        )

    def stop(self) -> None:
        for server in (self._reg_server, self._dra_server):
            if server is not None:
                server.stop(None)
        self.reg_socket.unlink(missing_ok=True)
        self.dra_socket.unlink(missing_ok=True)


class DraDriverDaemon:
    def __init__(
        self, options: DriverOptions, client: KubeClient | None, *, retry_s: float = RETRY_S
    ) -> None:
        self.options = options
        self.retry_s = retry_s
        self.client = client
        get_claim = self._get_claim if client is not None else _no_client
        self.drivers = [Driver(n, d, options, get_claim) for n, d in discover(options).items()]
        self.publishers = (
            {d.name: SlicePublisher(client, options.node_name, d.name) for d in self.drivers}
            if client is not None
            else {}
        )
        self._stopping = threading.Event()
        self._thread: threading.Thread | None = None

    def _get_claim(self, namespace: str, name: str) -> dict[str, Any]:
        assert self.client is not None
        return self.client.get(RESOURCE_CLAIMS, name, namespace)

    def start(self) -> None:
        if not self.drivers:
            raise SystemExit(
                "dra-driver: no driver applies on this node (no --config drivers, no GPUs, no CPUs)"
            )
        for driver in self.drivers:
            driver.serve()
        self.publish()
        self._thread = threading.Thread(target=self._loop, name="dra-driver", daemon=True)
        self._thread.start()

    def publish(self) -> bool:
        """Every driver's slice; False when some failed (retried by the loop)."""
        ok = True
        for driver in self.drivers:
            publisher = self.publishers.get(driver.name)
            if publisher is None:
                continue
            try:
                publisher.publish(driver.devices)
            except KubeError as exc:
                log.warning("driver %s: publishing ResourceSlice %s: %s", driver.name, publisher.name, exc)
                ok = False
        return ok

    def _loop(self) -> None:
        next_publish = time.monotonic() + self.retry_s
        while not self._stopping.wait(min(SOCKET_CHECK_S, self.retry_s)):
            if time.monotonic() >= next_publish:
                self.publish()
                next_publish = time.monotonic() + self.retry_s
            for driver in self.drivers:
                if not driver.reg_socket.exists():
                    log.info("driver %s: registration socket gone; serving it again", driver.name)
                    driver.serve_registration()

    def stop(self) -> None:
        self._stopping.set()
        if self._thread is not None:
            self._thread.join()
        for driver in self.drivers:
            driver.stop()


def _no_client(namespace: str, name: str) -> dict[str, Any]:
    raise RuntimeError("the driver runs without an API server (--kubeconfig), so it cannot read claims")


def run(options: DriverOptions, kubeconfig: str | None) -> int:
    import signal

    from kubenode.kubeclient.config import in_cluster, load

    client = KubeClient(load(kubeconfig)) if kubeconfig or in_cluster() else None
    daemon = DraDriverDaemon(options, client)
    stopping = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stopping.set())
    daemon.start()
    log.info(
        "kubenode dra-driver on node %s (pid %d): %s",
        options.node_name,
        os.getpid(),
        ", ".join(f"{d.name} ({len(d.devices)} devices)" for d in daemon.drivers),
    )
    wait_for_stop(stopping)  # in slices: a SIGTERM may land on a gRPC thread (kubenode/stopsignal.py)
    daemon.stop()
    return 0
