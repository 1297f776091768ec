"""A small, configurable device plugin for tests: well-behaved by default, broken on request.

Used in-process by the device-manager tests (`FakePlugin`) and as a program by the conformance tests:

    python tests/conformance/fake_device_plugin.py [--faults F1,F2] [--resource NAME]

The program reads the kubelet dir from `KUBENODE_KUBELET_DIR`, serves, registers, re-registers whenever
kubelet.sock is recreated, and exits on SIGTERM. Faults (each breaks one documented rule):
  wrong-version      Register with version v1beta2
  bad-name           Register the resource name "dongle" (no domain)
  bad-health         advertise health "healthy" (lowercase)
  long-id            advertise a device ID of 70 characters
  options-mismatch   Register says no preferred allocation, GetDevicePluginOptions says yes
  register-first     call Register half a second before serving
  no-reregister      never register again after a kubelet restart
  crash-on-unknown   exit the process when Allocate names an unknown device ID
  bad-preferred      GetPreferredAllocation answers one ID too many and drops must-include IDs
  missing-host-path  Allocate returns a DeviceSpec whose host path does not exist
  slow-prestart      PreStartContainer takes 40 s
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import grpc

from kubenode.api.deviceplugin.v1beta1 import api_pb2, api_pb2_grpc

FAULTS = frozenset(
    {
        "wrong-version",
        "bad-name",
        "bad-health",
        "long-id",
        "options-mismatch",
        "register-first",
        "no-reregister",
        "crash-on-unknown",
        "bad-preferred",
        "missing-host-path",
        "slow-prestart",
    }
)


@dataclass
class FakeDevice:
    id: str
    healthy: bool = True
    numa: tuple[int, ...] = ()


@dataclass
class Calls:
    """What the plugin was asked, for assertions."""

    allocate: list[list[list[str]]] = field(default_factory=list)
    preferred: list[tuple[list[str], list[str], int]] = field(default_factory=list)
    pre_start: list[list[str]] = field(default_factory=list)


# (available, must_include, size) -> answer
PreferredPolicy = Callable[[list[str], list[str], int], list[str]]


def first_fit(available: list[str], must_include: list[str], size: int) -> list[str]:
    answer = list(must_include)
    for device_id in available:
        if len(answer) >= size:
            break
        if device_id not in answer:
            answer.append(device_id)
    return answer


class FakePlugin(api_pb2_grpc.DevicePluginServicer):
    def __init__(
        self,
        plugin_dir: Path,
        resource: str = "example.com/fake",
        devices: Sequence[FakeDevice] = (),
        *,
        endpoint: str | None = None,
        pre_start_required: bool = False,
        preferred_available: bool = False,
        preferred: PreferredPolicy = first_fit,
        faults: frozenset[str] = frozenset(),
        allocate_error: str | None = None,
        extra_envs: Callable[[list[str]], dict[str, str]] | None = None,
    ) -> None:
        self.plugin_dir = plugin_dir
        self.resource = resource
        self.endpoint = endpoint or f"fake-{resource.replace('/', '-')}-{os.getpid()}-{id(self)}.sock"
        self.pre_start_required = pre_start_required
        self.preferred_available = preferred_available
        self.preferred_policy = preferred
        self.faults = faults
        self.allocate_error = allocate_error
        self.extra_envs = extra_envs
        self.calls = Calls()
        self._devices = list(devices)
        self._generation = 0
        self._changed = threading.Condition()
        self._closing = False
        self._server: grpc.Server | None = None

    @property
    def socket_path(self) -> Path:
        return self.plugin_dir / self.endpoint

    # ----- control -----

    def serve(self) -> None:
        """Serve on the socket (again, after a kubelet restart wiped it)."""
        self._shutdown_server()
        self.socket_path.unlink(missing_ok=True)
        server = grpc.server(ThreadPoolExecutor(max_workers=32))
        api_pb2_grpc.add_DevicePluginServicer_to_server(self, server)
        server.add_insecure_port(f"unix://{self.socket_path}")
        server.start()
        self._server = server

    def register(self, version: str = "v1beta1", resource: str | None = None) -> None:
        """Call Register on kubelet.sock; raises grpc.RpcError when the manager rejects it."""
        if "wrong-version" in self.faults:
            version = "v1beta2"
        name = resource or ("dongle" if "bad-name" in self.faults else self.resource)
        preferred = self.preferred_available and "options-mismatch" not in self.faults
        request = api_pb2.RegisterRequest(
            version=version,
            endpoint=self.endpoint,
            resource_name=name,
            options=api_pb2.DevicePluginOptions(
                pre_start_required=self.pre_start_required, get_preferred_allocation_available=preferred
            ),
        )
        with grpc.insecure_channel(f"unix://{self.plugin_dir / 'kubelet.sock'}") as channel:
            api_pb2_grpc.RegistrationStub(channel).Register(request, timeout=15)

    def set_devices(self, devices: Sequence[FakeDevice]) -> None:
        with self._changed:
            self._devices = list(devices)
            self._generation += 1
            self._changed.notify_all()

    def stop(self) -> None:
        self._shutdown_server()
        self.socket_path.unlink(missing_ok=True)

    def _shutdown_server(self) -> None:
        if self._server is None:
            return
        with self._changed:
            self._closing = True
            self._changed.notify_all()
        self._server.stop(grace=0.5).wait()
        self._server = None
        with self._changed:
            self._closing = False

    # ----- DevicePlugin service -----

    def GetDevicePluginOptions(self, request: api_pb2.Empty, context: grpc.ServicerContext) -> object:
        return api_pb2.DevicePluginOptions(
            pre_start_required=self.pre_start_required,
            get_preferred_allocation_available=self.preferred_available,
        )

    def ListAndWatch(self, request: api_pb2.Empty, context: grpc.ServicerContext) -> Iterator[object]:
        seen = -1
        while context.is_active():
            with self._changed:
                if self._generation == seen and not self._closing:
                    self._changed.wait(timeout=0.5)
                if self._closing:
                    return
                if self._generation == seen:
                    continue
                seen = self._generation
                devices = list(self._devices)
            yield api_pb2.ListAndWatchResponse(devices=[self._wire(d) for d in devices])

    def _wire(self, device: FakeDevice) -> api_pb2.Device:
        health = "Healthy" if device.healthy else "Unhealthy"
        if "bad-health" in self.faults:
            health = health.lower()
        topology = (
            api_pb2.TopologyInfo(nodes=[api_pb2.NUMANode(ID=n) for n in device.numa]) if device.numa else None
        )
        return api_pb2.Device(ID=device.id, health=health, topology=topology)

    def GetPreferredAllocation(
        self, request: api_pb2.PreferredAllocationRequest, context: grpc.ServicerContext
    ) -> object:
        responses = []
        for req in request.container_requests:
            available, must, size = (
                list(req.available_deviceIDs),
                list(req.must_include_deviceIDs),
                req.allocation_size,
            )
            self.calls.preferred.append((available, must, size))
            answer = self.preferred_policy(available, must, size)
            if "bad-preferred" in self.faults:
                answer = [i for i in available if i not in must][: size + 1]
            responses.append(api_pb2.ContainerPreferredAllocationResponse(deviceIDs=answer))
        return api_pb2.PreferredAllocationResponse(container_responses=responses)

    def Allocate(self, request: api_pb2.AllocateRequest, context: grpc.ServicerContext) -> object:
        self.calls.allocate.append([list(r.devices_ids) for r in request.container_requests])
        if self.allocate_error is not None:
            context.abort(grpc.StatusCode.INTERNAL, self.allocate_error)
        known = {d.id for d in self._devices}
        responses = []
        for req in request.container_requests:
            unknown = [i for i in req.devices_ids if i not in known]
            if unknown and "crash-on-unknown" in self.faults:
                os._exit(3)
            if unknown or not req.devices_ids:
                context.abort(
                    grpc.StatusCode.INVALID_ARGUMENT, f"unknown device IDs {unknown} for {self.resource}"
                )
            host = "/nonexistent/fake-device" if "missing-host-path" in self.faults else "/dev/null"
            responses.append(
                api_pb2.ContainerAllocateResponse(
                    envs={"FAKE_DEVICES": ",".join(req.devices_ids), **self._extra(list(req.devices_ids))},
                    devices=[
                        api_pb2.DeviceSpec(container_path=f"/dev/fake-{i}", host_path=host, permissions="rw")
                        for i in range(len(req.devices_ids))
                    ],
                    mounts=[
                        api_pb2.Mount(container_path="/run/fake", host_path="/etc/hostname", read_only=True)
                    ],
                    annotations={"example.com/fake-devices": ",".join(req.devices_ids)},
                    cdi_devices=[api_pb2.CDIDevice(name=f"example.com/fake={i}") for i in req.devices_ids],
                )
            )
        return api_pb2.AllocateResponse(container_responses=responses)

    def _extra(self, ids: list[str]) -> dict[str, str]:
        return self.extra_envs(ids) if self.extra_envs else {}

    def PreStartContainer(
        self, request: api_pb2.PreStartContainerRequest, context: grpc.ServicerContext
    ) -> object:
        self.calls.pre_start.append(list(request.devices_ids))
        if "slow-prestart" in self.faults:
            time.sleep(40)
        return api_pb2.PreStartContainerResponse()


def _kubelet_sock_identity(plugin: FakePlugin) -> tuple[int, int] | None:
    """Changes whenever kubelet.sock is recreated (inode numbers alone are often reused)."""
    try:
        st = (plugin.plugin_dir / "kubelet.sock").stat()
    except FileNotFoundError:
        return None
    return (st.st_ino, st.st_ctime_ns)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--faults", default="", help="comma-separated faults (see above)")
    parser.add_argument("--resource", default="example.com/fake")
    args = parser.parse_args(argv)
    faults = frozenset(f for f in args.faults.split(",") if f)
    if faults - FAULTS:
        parser.error(f"unknown faults: {sorted(faults - FAULTS)}")
    plugin_dir = Path(os.environ.get("KUBENODE_KUBELET_DIR", "/var/lib/kubelet/device-plugins"))
    devices = [FakeDevice(f"fake-{i}", numa=(i % 2,)) for i in range(4)]
    if "long-id" in faults:
        devices.append(FakeDevice("x" * 70))
    plugin = FakePlugin(
        plugin_dir,
        args.resource,
        devices,
        endpoint=f"fake-{os.getpid()}.sock",
        pre_start_required=True,
        preferred_available=True,
        faults=faults,
    )
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    registered: tuple[int, int] | None = None
    while not stop.is_set():
        identity = _kubelet_sock_identity(plugin)
        if registered is not None and not plugin.socket_path.exists():
            registered = (-1, -1)  # our socket was wiped: the kubelet restarted
        if identity is not None and identity != registered:
            if registered is not None and "no-reregister" in faults:
                stop.wait(0.05)
                continue
            if "register-first" in faults:
                threading.Thread(target=_register_quietly, args=(plugin,), daemon=True).start()
                time.sleep(0.5)
                plugin.serve()
            else:
                plugin.serve()
                _register_quietly(plugin)
            registered = identity
        stop.wait(0.05)
    plugin.stop()
    return 0


def _register_quietly(plugin: FakePlugin) -> None:
    try:
        plugin.register()
    except grpc.RpcError as err:
        print(f"fake plugin: Register rejected: {err.details()}", file=sys.stderr, flush=True)


if __name__ == "__main__":
    sys.exit(main())
