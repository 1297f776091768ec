"""The DRA drivers the plugin watcher registered, and a client per driver that speaks its API version.

A driver advertises service versions in GetInfo (`v1.DRAPlugin`, `v1beta1.DRAPlugin`); the agent
speaks the first one it supports in its own order (v1, then v1beta1), as the kubelet does. The
messages of both versions have the same fields, so the client builds the request from the module of
its version and hands back plain values: per claim UID, the devices (request names, pool, device, CDI
IDs) or the claim's error.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from types import ModuleType
from typing import Any

import grpc

from kubenode.api.dra.v1 import api_pb2 as v1
from kubenode.api.dra.v1 import api_pb2_grpc as v1_grpc
from kubenode.api.dra.v1beta1 import api_pb2 as v1beta1
from kubenode.api.dra.v1beta1 import api_pb2_grpc as v1beta1_grpc

# The agent's preference order: service name as drivers advertise it -> (messages, stubs).
VERSIONS: dict[str, tuple[ModuleType, ModuleType]] = {
    "v1.DRAPlugin": (v1, v1_grpc),
    "v1beta1.DRAPlugin": (v1beta1, v1beta1_grpc),
}
CALL_TIMEOUT_S = 45.0  # the kubelet's NodePrepareResources timeout


@dataclass(frozen=True)
class ClaimRef:
    namespace: str
    name: str
    uid: str


@dataclass(frozen=True)
class PreparedDevice:
    requests: tuple[str, ...]  # empty: every request of the claim
    pool: str
    device: str
    cdi_ids: tuple[str, ...]

    def to_json(self) -> dict[str, Any]:
        return {
            "requests": list(self.requests),
            "pool": self.pool,
            "device": self.device,
            "cdi": list(self.cdi_ids),
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> PreparedDevice:
        return cls(tuple(data["requests"]), str(data["pool"]), str(data["device"]), tuple(data["cdi"]))


class DriverCallError(Exception):
    """The call itself failed (unreachable driver, deadline, a missing answer)."""


def pick_version(advertised: list[str]) -> str | None:
    for version in VERSIONS:
        if version in advertised:
            return version
    return None


class DriverClient:
    def __init__(self, name: str, endpoint: str, version: str) -> None:
        self.name = name
        self.endpoint = endpoint
        self.version = version
        self._api, stubs = VERSIONS[version]
        self._channel = grpc.insecure_channel(f"unix://{endpoint}")
        self._stub = stubs.DRAPluginStub(self._channel)

    def close(self) -> None:
        self._channel.close()

    def _claims(self, claims: list[ClaimRef]) -> list[Any]:
        return [self._api.Claim(namespace=c.namespace, uid=c.uid, name=c.name) for c in claims]

    def _call(self, method: str, request: Any) -> Any:
        try:
            return getattr(self._stub, method)(request, timeout=CALL_TIMEOUT_S)
        except grpc.RpcError as exc:
            raise DriverCallError(f"{method} of {self.name}: {exc.code().name}: {exc.details()}") from None

    def prepare(self, claims: list[ClaimRef]) -> dict[str, list[PreparedDevice] | str]:
        """Per claim UID: its devices, or its error (a string)."""
        request = self._api.NodePrepareResourcesRequest(claims=self._claims(claims))
        response = self._call("NodePrepareResources", request)
        result: dict[str, list[PreparedDevice] | str] = {}
        for claim in claims:
            if claim.uid not in response.claims:
                result[claim.uid] = (
                    f"driver {self.name} did not answer for claim {claim.namespace}/{claim.name}"
                )
                continue
            answer = response.claims[claim.uid]
            if answer.error:
                result[claim.uid] = f"driver {self.name}: {answer.error}"
                continue
            result[claim.uid] = [
                PreparedDevice(tuple(d.request_names), d.pool_name, d.device_name, tuple(d.cdi_device_ids))
                for d in answer.devices
            ]
        return result

    def unprepare(self, claims: list[ClaimRef]) -> dict[str, str]:
        """Per claim UID: "" when unprepared, else its error."""
        request = self._api.NodeUnprepareResourcesRequest(claims=self._claims(claims))
        response = self._call("NodeUnprepareResources", request)
        return {
            c.uid: (
                response.claims[c.uid].error if c.uid in response.claims else f"no answer from {self.name}"
            )
            for c in claims
        }


class DriverRegistry:
    """Registered drivers by name; thread-safe (the watcher adds, pod workers call)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._drivers: dict[str, DriverClient] = {}
        self._registered = threading.Condition(self._lock)

    def add(self, client: DriverClient) -> None:
        with self._lock:
            old = self._drivers.pop(client.name, None)
            self._drivers[client.name] = client
            self._registered.notify_all()
        if old is not None:
            old.close()

    def remove(self, name: str, endpoint: str) -> bool:
        with self._lock:
            client = self._drivers.get(name)
            if client is None or client.endpoint != endpoint:
                return False  # re-registered meanwhile on another socket: keep that one
            del self._drivers[name]
        client.close()
        return True

    def get(self, name: str) -> DriverClient | None:
        with self._lock:
            return self._drivers.get(name)

    def names(self) -> list[str]:
        with self._lock:
            return sorted(self._drivers)

    def wait_for(self, name: str, timeout: float) -> bool:
        with self._lock:
            return self._registered.wait_for(lambda: name in self._drivers, timeout)

    def close(self) -> None:
        with self._lock:
            clients = list(self._drivers.values())
            self._drivers.clear()
        for client in clients:
            client.close()
