"""`kubenode conformance --dra-driver-cmd` against kubenode's DRA driver (nothing fails) and against
deliberately broken drivers (the check that catches each one fails, naming why)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from conformance.dra.checks import CHECKS

REPO = Path(__file__).resolve().parents[2]
KUBENODE = [sys.executable, "-m", "cli.main"]
ALL_DRA_CHECKS = [c.name for c in CHECKS]
NEVER_COMES = ("--slices-timeout", "0.5", "--restart-timeout", "0.5")
OUR_DRIVER = (
    f'{sys.executable} -m cli.main dra-driver --registry-dir "$REGISTRY_DIR" --plugin-dir "$PLUGIN_DIR" '
    '--cdi-dir "$CDI_DIR" --kubeconfig "$KUBECONFIG" --node-name "$NODE_NAME" --config "$CONFIG"'
)


def conformance(command: str, tmp_path: Path, *waits: str) -> tuple[int, dict[str, str]]:
    config = tmp_path / "driver.yaml"
    config.write_text("drivers: [cpu.kubenode.io]\ncdiHookPath: /usr/bin/kubenode\n")
    done = subprocess.run(
        [*KUBENODE, "conformance", "--json", "--register-timeout", "20", *waits, "--dra-driver-cmd", command],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=110,
        env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(REPO), "CONFIG": str(config)},
    )
    document = json.loads(done.stdout)
    return done.returncode, {c["name"]: f"{c['status']} {c['detail']}" for c in document["checks"]}


def test_kubenode_dra_driver_passes(tmp_path: Path) -> None:
    code, checks = conformance(OUR_DRIVER, tmp_path)
    assert code == 0, checks
    # Our embedded API server serves resource.k8s.io/v1: every check runs, none is skipped.
    assert set(checks) == set(ALL_DRA_CHECKS)
    for name, result in checks.items():
        assert result.startswith("PASS"), (name, result)
    assert "its CDI specs are gone" in checks["dra.unprepare"], checks["dra.unprepare"]


@pytest.mark.parametrize(
    ("mode", "check", "why"),
    [
        ("wrongtype", "dra.register.info", "GetInfo type is 'CSIPlugin'"),
        ("noversion", "dra.versions", "none of ['v9.DRAPlugin']"),
        ("failsunprepare", "dra.unprepare.unknown", "unprepare always fails here"),
    ],
)
def test_broken_drivers_fail_the_check_that_catches_them(
    tmp_path: Path, mode: str, check: str, why: str
) -> None:
    command = f"{sys.executable} {Path(__file__).parent / 'brokendriver.py'} {mode}"
    # These drivers publish no ResourceSlice and never register again: short waits for what never comes
    # (the defaults, 30 s each, are for drivers that do; the test above shows ours does, within them).
    code, checks = conformance(command, tmp_path, *NEVER_COMES)
    assert code == 1
    assert checks[check].startswith("FAIL") and why in checks[check], checks
    assert "within 0.5 s" in checks["dra.slices"] and "within 0.5 s" in checks["dra.reregister"], checks
