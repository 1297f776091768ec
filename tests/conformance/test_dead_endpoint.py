"""A registered endpoint nobody serves costs one dial, not one per check; optional calls the kubelet
would never make (Register rejected, or not advertised) SKIP instead of failing on the dead endpoint."""

from __future__ import annotations

import socket
import time
from pathlib import Path
from typing import Any

import pytest

import conformance.target as target_module
from agent.cm.devicemanager import RegistrationEvent
from conformance.checks import PER_RESOURCE_CHECKS
from conformance.target import Fail, Limits, Skip, Target
from kubenode import deviceplugin_client


def _event(endpoint: str, *, accepted: bool = True) -> RegistrationEvent:
    return RegistrationEvent(
        resource_name="example.com/dead",
        version="v1beta1",
        endpoint=endpoint,
        request_pre_start_required=True,
        request_preferred_allocation=True,
        serving_at_register=True,
        plugin_pre_start_required=None,
        plugin_preferred_allocation=None,
        accepted=accepted,
        error=None if accepted else 'requested API version "v1alpha" is not supported by kubelet',
        at=time.monotonic(),
    )


def _counting_dials(monkeypatch: pytest.MonkeyPatch) -> list[Path]:
    """Record each dial the checks make (counted, not timed, so the machine's load cannot matter)."""
    dials: list[Path] = []
    real = deviceplugin_client.dial

    def dial(path: Path, timeout: float) -> Any:
        dials.append(path)
        return real(path, timeout)

    monkeypatch.setattr(target_module, "dial", dial)
    return dials


def _run_all(target: Target) -> dict[str, str]:
    outcome = {}
    for check in PER_RESOURCE_CHECKS:
        try:
            check.run(target)
            outcome[check.name] = "PASS"
        except Fail as err:
            outcome[check.name] = f"FAIL {err}"
        except Skip as err:
            outcome[check.name] = f"SKIP {err}"
    target.close()
    return outcome


def test_a_dead_endpoint_is_dialled_once(short_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    dials = _counting_dials(monkeypatch)
    # A socket file that nobody accepts on: connecting is refused, so only the dial deadline ends the wait.
    with socket.socket(socket.AF_UNIX) as dead:
        dead.bind(str(short_dir / "dead.sock"))
        target = Target(_event("dead.sock"), short_dir, Limits(dial=1.0))
        outcome = _run_all(target)
    assert dials == [short_dir / "dead.sock"], f"the dead endpoint was dialled {len(dials)} times"
    dialled = [name for name, result in outcome.items() if "not ready within 1 s" in result]
    assert dialled and all("not retried" in outcome[n] for n in dialled[1:]), outcome
    # Every check that needs the endpoint fails; the ones judged from Register alone still pass.
    assert outcome["register.version"] == "PASS" and outcome["register.serving_first"] == "PASS"
    assert outcome["preferred.size"].startswith("FAIL") and outcome["prestart.deadline"].startswith("FAIL")


def test_a_rejected_registration_skips_the_optional_calls(
    short_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    dials = _counting_dials(monkeypatch)
    outcome = _run_all(Target(_event("gone.sock", accepted=False), short_dir, Limits(dial=0.5)))
    assert len(dials) == 1
    assert outcome["register.options"].startswith("FAIL failed to dial device plugin")
    assert outcome["listandwatch.first_message"].endswith(
        "not ready within 0.5 s (dialled once; not retried)"
    )
    for name in ("preferred.subset", "preferred.must_include", "preferred.size", "prestart.deadline"):
        assert outcome[name].startswith("SKIP Register was rejected"), outcome[name]
