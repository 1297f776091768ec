"""`kubenode conformance` against our plugin, a well-behaved fake, and deliberately broken plugins."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import uuid
import xml.etree.ElementTree as ET
from pathlib import Path

import psutil
import pytest

from conformance.results import CheckResult, Status
from conformance.suite import SuiteConfig, run_suite
from conformance.target import Limits
from tests.deviceplugin.support import cpu_config

REPO = Path(__file__).resolve().parents[2]
FAKE = f"{sys.executable} {REPO / 'tests/conformance/fake_device_plugin.py'}"
OUR_PLUGIN = f"{sys.executable} -m cli.main deviceplugin --config"
FAST = Limits(register=15.0, settle=0.3, restart=3.0, stop_grace=2.0)


def conformance(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "cli.main", "--log-level", "ERROR", "conformance", *args],
        capture_output=True,
        text=True,
        timeout=90,
        cwd=REPO,
    )


def run(plugin_cmd: str, tmp_dir: Path, resource: str | None = None) -> list[CheckResult]:
    return run_suite(SuiteConfig(tmp_dir, plugin_cmd, resource, (), FAST))


def failed(results: list[CheckResult]) -> set[str]:
    return {r.name for r in results if r.status is Status.FAIL}


@pytest.mark.parametrize("config", ["static.yaml", "cpu.yaml"])
def test_our_device_plugin_passes_every_check(config: str, tmp_path: Path) -> None:
    path = cpu_config(tmp_path) if config == "cpu.yaml" else REPO / "tests/configs" / config
    out = conformance("--plugin-cmd", f"{OUR_PLUGIN} {path}")
    assert out.returncode == 0, out.stdout + out.stderr
    assert "FAIL" not in out.stdout
    assert out.stdout.splitlines()[-1].split(" passed, ")[1].startswith("0 failed")
    assert "PASS  kubelet_restart.reregister" in out.stdout


def test_a_well_behaved_plugin_passes_everything_and_json_and_junit_agree(tmp_path: Path) -> None:
    junit = tmp_path / "junit.xml"
    out = conformance("--plugin-cmd", FAKE, "--json", "--junit", str(junit))
    assert out.returncode == 0, out.stdout + out.stderr
    document = json.loads(out.stdout)
    statuses = {c["name"]: c["status"] for c in document["checks"]}
    assert set(statuses.values()) == {"PASS"}
    assert {"prestart.deadline", "preferred.size", "kubelet_restart.reregister"} <= set(statuses)
    suite = ET.parse(junit).getroot()
    assert suite.get("tests") == str(len(statuses)) and suite.get("failures") == "0"


@pytest.mark.parametrize(
    ("fault", "expected"),
    [
        ("wrong-version", {"register.version"}),
        ("bad-name", {"register.resource_name"}),
        ("bad-health", {"listandwatch.health"}),
        ("long-id", {"listandwatch.device_ids"}),
        ("options-mismatch", {"register.options"}),
        ("register-first", {"register.serving_first"}),
        ("no-reregister", {"kubelet_restart.reregister"}),
        ("bad-preferred", {"preferred.must_include", "preferred.size"}),
        ("missing-host-path", {"allocate.device_specs"}),
    ],
)
def test_a_broken_plugin_fails_exactly_the_right_checks(
    fault: str, expected: set[str], short_dir: Path
) -> None:
    resource = "dongle" if fault == "bad-name" else "example.com/fake"
    results = run(f"{FAKE} --faults {fault}", short_dir, resource)
    assert failed(results) == expected, [(r.name, r.detail) for r in results if r.status is Status.FAIL]


def test_a_plugin_that_crashes_on_an_unknown_id_fails_that_check(short_dir: Path) -> None:
    results = run(f"{FAKE} --faults crash-on-unknown", short_dir, "example.com/fake")
    by_name = {r.name: r for r in results}
    assert by_name["allocate.requested_ids"].status is Status.PASS
    assert by_name["allocate.unknown_id"].status is Status.FAIL
    assert by_name["plugin.process"].status is Status.FAIL
    assert "exited with code 3" in by_name["plugin.process"].detail


def test_the_plugin_process_group_is_stopped_even_if_it_ignores_sigterm(short_dir: Path) -> None:
    marker = f"example.com/leak-{uuid.uuid4().hex[:8]}"
    command = f"{FAKE} --resource {marker} & trap '' TERM; sleep 60"
    results = run_suite(SuiteConfig(short_dir, command, marker, ("register",), FAST))
    assert failed(results) == set() and len(results) == 5
    leftovers = [p for p in psutil.process_iter(["cmdline"]) if marker in " ".join(p.info["cmdline"] or [])]
    assert leftovers == []


def test_no_registration_is_one_clear_failure() -> None:
    out = conformance("--plugin-cmd", "sleep 5", "--register-timeout", "0.5")
    assert out.returncode == 1
    assert "FAIL  register.received  [*]  no Register call for any resource within 0.5 s" in out.stdout
    assert "0 passed, 1 failed, 0 skipped" in out.stdout


def test_a_plugin_that_exits_before_registering_is_reported_at_once() -> None:
    out = conformance("--plugin-cmd", "echo cannot start; exit 7")
    assert out.returncode == 1
    line = out.stdout.splitlines()[0]
    assert "before the plugin exited; the plugin exited with code 7: cannot start" in line
    assert float(out.stdout.split(" in ")[-1].split()[0]) < 5


def test_refuses_a_dir_whose_kubelet_sock_is_served(short_dir: Path) -> None:
    kubelet_sock = short_dir / "kubelet.sock"
    other_plugin = short_dir / "vendor.sock"
    with socket.socket(socket.AF_UNIX) as kubelet, socket.socket(socket.AF_UNIX) as plugin:
        kubelet.bind(str(kubelet_sock))
        kubelet.listen()
        plugin.bind(str(other_plugin))
        out = conformance("--kubelet-dir", str(short_dir), "--register-timeout", "0.5")
        assert out.returncode == 2, out.stdout + out.stderr
        assert f"{kubelet_sock} is being served" in out.stderr
        assert (
            kubelet_sock.is_socket() and other_plugin.is_socket()
        )  # nothing of the running kubelet's removed


def test_usage_errors_and_listing() -> None:
    bad = conformance("--only", "allocate.nope")
    assert bad.returncode == 2 and "allocate.nope" in bad.stderr
    listed = conformance("--list")
    assert listed.returncode == 0 and "kubelet_restart.reregister" in listed.stdout


def test_a_slow_prestart_misses_the_deadline(short_dir: Path) -> None:
    limits = Limits(register=15.0, settle=0.3, restart=3.0, stop_grace=1.0, pre_start=0.5)
    results = run_suite(SuiteConfig(short_dir, f"{FAKE} --faults slow-prestart", None, ("prestart",), limits))
    (result,) = results
    assert result.status is Status.FAIL and "within the kubelet's 0.5 s" in result.detail
