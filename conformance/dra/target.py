"""What the DRA checks act on: the driver as registered (GetInfo), a channel to its DRA socket in the
version chosen, the embedded API server, and the directories the suite gave the driver."""

from __future__ import annotations

import stat
import time
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any

import grpc

from conformance.target import Fail
from kubenode.api.dra.v1 import api_pb2 as v1
from kubenode.api.dra.v1 import api_pb2_grpc as v1_grpc
from kubenode.api.dra.v1beta1 import api_pb2 as v1beta1
from kubenode.api.dra.v1beta1 import api_pb2_grpc as v1beta1_grpc
from kubenode.api.pluginregistration.v1 import api_pb2 as reg
from kubenode.api.pluginregistration.v1 import api_pb2_grpc as reg_grpc

VERSIONS: dict[str, tuple[ModuleType, ModuleType]] = {
    "v1.DRAPlugin": (v1, v1_grpc),
    "v1beta1.DRAPlugin": (v1beta1, v1beta1_grpc),
}
CALL_S = 10.0


@dataclass
class DraDirs:
    registry: Path
    plugins: Path
    cdi: Path


@dataclass(frozen=True)
class DraWaits:
    """How long the checks wait, in seconds, for what a driver does on its own: its first registration
    socket, its ResourceSlices, its registration again once the registry directory is recreated. A
    conforming driver ends each wait early; a driver that never does one waits it out."""

    register: float = 30.0
    slices: float = 30.0
    reregister: float = 30.0


@dataclass
class DraTarget:
    dirs: DraDirs
    node: str
    client: Any  # KubeClient of the embedded API server
    waits: DraWaits = field(default_factory=DraWaits)
    socket: Path | None = None
    info: Any = None
    claims_made: list[tuple[str, str]] = field(default_factory=list)  # (name, uid) the suite created

    @property
    def driver(self) -> str:
        return str(self.info.name) if self.info is not None else "?"

    def wait_for_socket(self, timeout: float) -> Path:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for path in sorted(self.dirs.registry.glob("*")) if self.dirs.registry.is_dir() else []:
                if is_socket(path):
                    return path
            time.sleep(0.05)
        raise Fail(f"no registration socket in {self.dirs.registry} within {timeout:g} s")

    def get_info(self, timeout: float) -> Any:
        self.socket = self.wait_for_socket(timeout)
        with grpc.insecure_channel(f"unix://{self.socket}") as channel:
            self.info = reg_grpc.RegistrationStub(channel).GetInfo(
                reg.InfoRequest(), timeout=CALL_S, wait_for_ready=True
            )
        return self.info

    def notify(self, registered: bool, error: str = "") -> None:
        assert self.socket is not None
        with grpc.insecure_channel(f"unix://{self.socket}") as channel:
            reg_grpc.RegistrationStub(channel).NotifyRegistrationStatus(
                reg.RegistrationStatus(plugin_registered=registered, error=error), timeout=CALL_S
            )

    def versions(self) -> list[str]:
        return [v for v in VERSIONS if v in list(self.info.supported_versions)]

    def call(self, version: str, method: str, claims: list[tuple[str, str, str]]) -> Any:
        """NodePrepareResources / NodeUnprepareResources with (namespace, uid, name) claims."""
        api, stubs = VERSIONS[version]
        request_type = (
            api.NodePrepareResourcesRequest if method == "prepare" else api.NodeUnprepareResourcesRequest
        )
        request = request_type(claims=[api.Claim(namespace=n, uid=u, name=c) for n, u, c in claims])
        with grpc.insecure_channel(f"unix://{self.info.endpoint}") as channel:
            stub = stubs.DRAPluginStub(channel)
            rpc = stub.NodePrepareResources if method == "prepare" else stub.NodeUnprepareResources
            try:
                return rpc(request, timeout=CALL_S)
            except grpc.RpcError as exc:
                raise Fail(f"{method} over {version}: {exc.code().name}: {exc.details()}") from None


def is_socket(path: Path) -> bool:
    try:
        return stat.S_ISSOCK(path.stat().st_mode)
    except OSError:
        return False
