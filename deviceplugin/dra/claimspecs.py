"""One CDI spec file per prepared claim: written atomically at prepare, removed at unprepare.

File `<cdi-dir>/kubenode-dra_<driver>_<claim uid>.json`, kind `<driver>/claim`, one CDI device per
allocated device named `<claim uid>-<device>` whose edits are the device's (inventory.py). The CDI
device ID handed to the kubelet is `<driver>/claim=<claim uid>-<device>`. A runtime reads only whole
files (write_atomically: temporary file, rename), and the driver never touches a file it did not
name this way. The spec's annotation `dra.kubenode.io/prepared` holds what prepare answered (devices,
pools, requests, CDI IDs): the driver's record of prepared claims is the set of its spec files.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from kubenode.atomicfile import write_atomically

CDI_VERSION = "0.6.0"  # device names may start with a digit (claim UIDs do); hostPath; annotations
# The driver's answer for the claim, kept in its spec: the spec file is the driver's checkpoint too, so a
# prepare costs one durable write, and a restarted driver answers a repeated prepare from it.
ANSWER_ANNOTATION = "dra.kubenode.io/prepared"


def kind_of(driver: str) -> str:
    return f"{driver}/claim"


def cdi_id(driver: str, claim_uid: str, device: str) -> str:
    return f"{kind_of(driver)}={claim_uid}-{device}"


class ClaimSpecs:
    def __init__(self, cdi_dir: str | Path, driver: str) -> None:
        self.dir = Path(cdi_dir)
        self.driver = driver

    def path(self, claim_uid: str) -> Path:
        return self.dir / f"kubenode-dra_{self.driver}_{claim_uid}.json"

    def write(
        self, claim_uid: str, devices: Sequence[tuple[str, Mapping[str, Any]]], answer: Any = None
    ) -> list[str]:
        """The spec of the claim's (device name, CDI edits), with `answer` (JSON) kept in its annotation;
        returns the CDI IDs, one per device."""
        spec = {
            "cdiVersion": CDI_VERSION,
            "kind": kind_of(self.driver),
            "annotations": {ANSWER_ANNOTATION: json.dumps(answer, sort_keys=True)},
            "devices": [
                {"name": f"{claim_uid}-{name}", "containerEdits": dict(edits)} for name, edits in devices
            ],
        }
        self.dir.mkdir(parents=True, exist_ok=True)
        data = json.dumps(spec, indent=2).encode() + b"\n"
        # Atomic (a runtime never reads half a file) but not fsynced: the CDI directory is /var/run/cdi, a
        # tmpfs that a power cut empties anyway, and with it go the containers that used the spec.
        write_atomically(self.path(claim_uid), data, durable=False)
        self.path(claim_uid).chmod(0o644)  # runtimes read it as another user
        return [cdi_id(self.driver, claim_uid, name) for name, _ in devices]

    def remove(self, claim_uid: str) -> None:
        self.path(claim_uid).unlink(missing_ok=True)

    def answers(self) -> dict[str, Any]:
        """Claim UID -> the answer kept in its spec (a restarted driver's prepared claims)."""
        found = {}
        for uid in self.present():
            try:
                spec = json.loads(self.path(uid).read_text())
                found[uid] = json.loads(spec["annotations"][ANSWER_ANNOTATION])
            except (OSError, ValueError, KeyError, TypeError) as exc:
                raise SystemExit(f"{self.path(uid)}: unreadable claim spec: {exc!r}") from None
        return found

    def present(self) -> list[str]:
        """The claim UIDs whose spec is on disk."""
        prefix = f"kubenode-dra_{self.driver}_"
        return sorted(p.name[len(prefix) : -len(".json")] for p in self.dir.glob(f"{prefix}*.json"))
