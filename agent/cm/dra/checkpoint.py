"""The prepared claims, checkpointed (the kubelet's claiminfo cache and `dra_manager_state`).

One JSON file, `<state-dir>/dra_manager_state.json`, replaced atomically on every change. A claim is
written *before* its driver is asked to prepare it (state "preparing") and marked "prepared" after, so an
agent killed at any point finds every claim a driver may have prepared: at start, a "preparing" claim
of a pod still here is prepared again (drivers make prepare idempotent, so nothing is done twice), and a
claim whose pods are all gone is unprepared (nothing leaks). Entry: claim UID -> namespace, name, the
pods it serves, its drivers, the state and the devices each driver answered.
"""

from __future__ import annotations

import json
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agent.cm.dra.plugins import ClaimRef, PreparedDevice
from kubenode.atomicfile import write_atomically

STATE_FILE = "dra_manager_state.json"
PREPARING = "preparing"
PREPARED = "prepared"


@dataclass
class ClaimEntry:
    ref: ClaimRef
    drivers: list[str]
    pods: set[str] = field(default_factory=set)
    state: str = PREPARING
    devices: dict[str, list[PreparedDevice]] = field(default_factory=dict)  # driver -> devices

    def to_json(self) -> dict[str, Any]:
        return {
            "namespace": self.ref.namespace,
            "name": self.ref.name,
            "drivers": list(self.drivers),
            "pods": sorted(self.pods),
            "state": self.state,
            "devices": {d: [x.to_json() for x in devs] for d, devs in self.devices.items()},
        }

    @classmethod
    def from_json(cls, uid: str, data: dict[str, Any]) -> ClaimEntry:
        return cls(
            ClaimRef(str(data["namespace"]), str(data["name"]), uid),
            [str(d) for d in data["drivers"]],
            {str(p) for p in data["pods"]},
            str(data["state"]),
            {
                str(d): [PreparedDevice.from_json(x) for x in devs]
                for d, devs in dict(data["devices"]).items()
            },
        )


class ClaimStore:
    def __init__(self, state_dir: Path) -> None:
        self.path = state_dir / STATE_FILE
        self.lock = threading.RLock()
        self.claims: dict[str, ClaimEntry] = self._load()

    def _load(self) -> dict[str, ClaimEntry]:
        try:
            data = json.loads(self.path.read_text())
            return {str(uid): ClaimEntry.from_json(str(uid), e) for uid, e in dict(data["claims"]).items()}
        except FileNotFoundError:
            return {}
        except (OSError, ValueError, KeyError, TypeError) as exc:
            # Refusing to start is better than forgetting prepared claims (they would leak).
            raise RuntimeError(f"{self.path}: unreadable DRA checkpoint: {exc!r}") from None

    def save(self, *, durable: bool = True) -> None:
        """Replace the file (atomically always). `durable=False` leaves the fsyncs to the kernel: only for a
        change whose loss in a power cut is safe to redo (a claim marked prepared reverts to preparing and
        is prepared again, idempotently; a claim removed after its unprepare is unprepared again)."""
        with self.lock:
            data = {"claims": {uid: e.to_json() for uid, e in sorted(self.claims.items())}}
        self.path.parent.mkdir(parents=True, exist_ok=True)
        write_atomically(self.path, json.dumps(data, sort_keys=True).encode(), durable=durable)

    def of_pod(self, pod_uid: str) -> list[ClaimEntry]:
        with self.lock:
            return [e for e in self.claims.values() if pod_uid in e.pods]
