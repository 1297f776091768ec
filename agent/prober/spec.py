"""A container's probes, read from the pod's spec with the API server's defaults.

`probes_of(pod)` returns every probe of the pod's app containers and sidecars (a regular init
container is never probed, as in the kubelet) as `ProbeSpec`s: the kind (Liveness, Readiness,
Startup), the timing fields defaulted as kube defaults them (initialDelaySeconds 0, periodSeconds 10,
timeoutSeconds 1, successThreshold 1, failureThreshold 3; successThreshold is always 1 for liveness
and startup), the probe-level terminationGracePeriodSeconds, and exactly one handler. A probe that
cannot be used (no handler, two handlers, a field of the wrong type) is kept with `error` set: it
fails every time with that message, as a probe the kubelet cannot run, and the agent goes on.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from kubenode.model import Pod

LIVENESS_FIELD, READINESS_FIELD, STARTUP_FIELD = "livenessProbe", "readinessProbe", "startupProbe"
HANDLERS = ("exec", "httpGet", "tcpSocket", "grpc")


class ProbeType(enum.StrEnum):
    """As the kubelet names them in events and in the prober_probe_total metric."""

    LIVENESS = "Liveness"
    READINESS = "Readiness"
    STARTUP = "Startup"


_FIELDS = {
    ProbeType.LIVENESS: LIVENESS_FIELD,
    ProbeType.READINESS: READINESS_FIELD,
    ProbeType.STARTUP: STARTUP_FIELD,
}


@dataclass(frozen=True)
class ContainerPort:
    name: str
    port: int


@dataclass(frozen=True)
class ProbeSpec:
    pod_uid: str
    container: str
    kind: ProbeType
    handler: str = ""  # one of HANDLERS
    action: Mapping[str, Any] = field(default_factory=dict)  # the handler's object as written
    initial_delay: int = 0
    period: int = 10
    timeout: int = 1
    success_threshold: int = 1
    failure_threshold: int = 3
    termination_grace: int | None = None
    ports: tuple[ContainerPort, ...] = ()
    error: str = ""  # why the probe cannot run; it then fails with this message

    @property
    def key(self) -> tuple[str, str, ProbeType]:
        return (self.pod_uid, self.container, self.kind)


def _int(raw: Mapping[str, Any], name: str, default: int, minimum: int) -> int:
    value = raw.get(name)
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValueError(f"{name}: must be an integer, got {value!r}")
    if value < minimum:
        raise ValueError(f"{name}: must be at least {minimum}, got {value}")
    return value


def _ports(container: Mapping[str, Any]) -> tuple[ContainerPort, ...]:
    ports = []
    for entry in container.get("ports") or []:
        if isinstance(entry, Mapping) and isinstance(entry.get("containerPort"), int):
            ports.append(ContainerPort(str(entry.get("name") or ""), int(entry["containerPort"])))
    return tuple(ports)


def parse_probe(uid: str, container: Mapping[str, Any], kind: ProbeType) -> ProbeSpec | None:
    raw = container.get(_FIELDS[kind])
    if raw is None:
        return None
    name = str(container.get("name") or "")
    where = f"container {name} {_FIELDS[kind]}"
    base = ProbeSpec(uid, name, kind, ports=_ports(container))
    if not isinstance(raw, Mapping):
        return _broken(base, f"{where}: must be an object")
    handlers = [h for h in HANDLERS if raw.get(h) is not None]
    if len(handlers) != 1:
        found = ", ".join(handlers) or "none"
        return _broken(base, f"{where}: needs exactly one of {', '.join(HANDLERS)} (found {found})")
    action = raw[handlers[0]]
    if not isinstance(action, Mapping):
        return _broken(base, f"{where}.{handlers[0]}: must be an object")
    try:
        success = _int(raw, "successThreshold", 1, 1)
        if kind != ProbeType.READINESS and success != 1:
            raise ValueError(f"successThreshold: must be 1 for a {kind.value.lower()} probe")
        grace = raw.get("terminationGracePeriodSeconds")
        if grace is not None and (isinstance(grace, bool) or not isinstance(grace, int) or grace < 1):
            raise ValueError(f"terminationGracePeriodSeconds: must be a positive integer, got {grace!r}")
        return ProbeSpec(
            uid,
            name,
            kind,
            handler=handlers[0],
            action=dict(action),
            initial_delay=_int(raw, "initialDelaySeconds", 0, 0),
            period=_int(raw, "periodSeconds", 10, 1),
            timeout=_int(raw, "timeoutSeconds", 1, 1),
            success_threshold=success,
            failure_threshold=_int(raw, "failureThreshold", 3, 1),
            termination_grace=grace,
            ports=base.ports,
        )
    except ValueError as exc:
        return _broken(base, f"{where}.{exc}")


def _broken(base: ProbeSpec, message: str) -> ProbeSpec:
    return ProbeSpec(base.pod_uid, base.container, base.kind, ports=base.ports, error=message)


def probed_containers(pod: Pod) -> Sequence[Mapping[str, Any]]:
    """The raw specs of the containers the kubelet probes: app containers and sidecars."""
    spec = pod.raw.get("spec") if isinstance(pod.raw, Mapping) else None
    if not isinstance(spec, Mapping):
        return ()
    found = [c for c in spec.get("containers") or [] if isinstance(c, Mapping)]
    sidecars = {c.name for c in pod.init_containers if c.is_sidecar}
    found += [
        c for c in spec.get("initContainers") or [] if isinstance(c, Mapping) and c.get("name") in sidecars
    ]
    return found


def probes_of(pod: Pod) -> list[ProbeSpec]:
    probes = []
    for container in probed_containers(pod):
        for kind in ProbeType:
            probe = parse_probe(pod.uid, container, kind)
            if probe is not None:
                probes.append(probe)
    return probes


def readiness_gates(pod: Pod) -> list[str]:
    """spec.readinessGates[].conditionType, in order."""
    spec = pod.raw.get("spec") if isinstance(pod.raw, Mapping) else None
    gates = spec.get("readinessGates") if isinstance(spec, Mapping) else None
    return [str(g["conditionType"]) for g in gates or [] if isinstance(g, Mapping) and g.get("conditionType")]


def gate_conditions(pod: Pod) -> tuple[tuple[str, str], ...]:
    """(type, status) of the pod's status conditions named by its readiness gates."""
    gates = readiness_gates(pod)
    if not gates:
        return ()
    status = pod.raw.get("status") if isinstance(pod.raw, Mapping) else None
    conditions = status.get("conditions") if isinstance(status, Mapping) else None
    return tuple(
        (str(c.get("type")), str(c.get("status")))
        for c in conditions or []
        if isinstance(c, Mapping) and c.get("type") in gates
    )
