"""The shipped systemd units pass `systemd-analyze verify` without a single warning, give a reason for every
setting, start the command `make install` puts in place, and place the agent's pods inside its delegation.

systemd-analyze comes with the systemd package (Debian: `apt-get install systemd`); without it this test
fails and says so (docs/development.md)."""

from __future__ import annotations

import configparser
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from deviceplugin.cdi import CpusetSpec, spec_file_name
from deviceplugin.hookcommand import HookCommand, isolated_argv

ROOT = Path(__file__).resolve().parent.parent
UNITS = sorted((ROOT / "systemd").glob("*.service"))
INSTALLED_KUBENODE = "/usr/local/bin/kubenode"


def _settings(unit: Path) -> list[tuple[int, str, str]]:
    """(line index, key, value) of every setting."""
    found = []
    for index, line in enumerate(unit.read_text().splitlines()):
        if line and not line.startswith(("#", "[")):
            key, _, value = line.partition("=")
            found.append((index, key, value))
    return found


def test_units_exist() -> None:
    assert [u.name for u in UNITS] == ["kubenode-agent.service", "kubenode-deviceplugin.service"]


@pytest.mark.parametrize("unit", UNITS, ids=lambda u: u.name)
def test_systemd_analyze_verify_has_nothing_to_say(unit: Path, tmp_path: Path) -> None:
    analyze = shutil.which("systemd-analyze")
    if analyze is None:
        pytest.fail("systemd-analyze is missing: install systemd (Debian: apt-get install systemd)")
    # The one change: ExecStart's binary, which `make install` links, points at this checkout's kubenode
    # (verify insists that the command exists); every other line is verified as shipped.
    here = str(Path(sys.executable).parent / "kubenode")
    text = unit.read_text()
    assert text.count(f"ExecStart={INSTALLED_KUBENODE} ") == 1
    copy = tmp_path / unit.name
    copy.write_text(text.replace(f"ExecStart={INSTALLED_KUBENODE} ", f"ExecStart={here} "))
    result = subprocess.run([analyze, "verify", str(copy)], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0 and result.stdout + result.stderr == "", result.stdout + result.stderr


@pytest.mark.parametrize("unit", UNITS, ids=lambda u: u.name)
def test_every_setting_has_a_reason(unit: Path) -> None:
    lines = unit.read_text().splitlines()
    unexplained = [key for index, key, _ in _settings(unit) if not lines[index - 1].startswith("#")]
    assert unexplained == [], f"{unit.name}: settings without a comment above them: {unexplained}"


def test_make_install_provides_what_the_units_name() -> None:
    dry_run = subprocess.run(
        ["make", "-n", "install"], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout
    assert f"ln -sfn /opt/kubenode/bin/kubenode {INSTALLED_KUBENODE}" in dry_run
    assert "docs/*.md /opt/kubenode/docs/" in dry_run
    for unit in UNITS:
        settings = {key: value for _, key, value in _settings(unit)}
        assert settings["ExecStart"].startswith(INSTALLED_KUBENODE + " ")
        doc = settings["Documentation"].removeprefix("file:///opt/kubenode/docs/")
        assert (ROOT / "docs" / doc).is_file(), settings["Documentation"]


def test_agent_unit_keeps_its_pods_inside_its_delegation() -> None:
    unit = configparser.ConfigParser(strict=False, interpolation=None)
    unit.read(ROOT / "systemd/kubenode-agent.service")
    service = unit["Service"]
    assert service["Delegate"] == "yes" and service["KillMode"] == "process"
    # The systemd driver with no --cgroup-root: the root is the unit's own cgroup (docs/cgroups.md).
    assert "--cgroup-driver systemd" in service["ExecStart"] and "--cgroup-root" not in service["ExecStart"]
    assert "StartLimitIntervalSec" in unit["Unit"] and "StartLimitIntervalSec" not in service
    cgroups_doc = (ROOT / "docs/cgroups.md").read_text()
    assert "Delegate=yes" in cgroups_doc and "systemd/kubenode-agent.service" in cgroups_doc


# `systemd-analyze security --offline=true`: the plugin at most 3.0 (OK); the agent as far as its cgroup and
# process work allows (docs/deploy.md lists what it cannot take), held where it is now so it cannot slip.
EXPOSURE_LIMITS = {"kubenode-deviceplugin.service": 3.0, "kubenode-agent.service": 6.8}


@pytest.mark.parametrize("unit", UNITS, ids=lambda u: u.name)
def test_exposure_scores(unit: Path) -> None:
    analyze = shutil.which("systemd-analyze")
    if analyze is None:
        pytest.fail("systemd-analyze is missing: install systemd (Debian: apt-get install systemd)")
    result = subprocess.run(
        [analyze, "security", "--offline=true", str(unit)], capture_output=True, text=True, timeout=60
    )
    [line] = [line for line in result.stdout.splitlines() if "Overall exposure level" in line]
    score = float(line.split(":", 1)[1].split()[0])
    assert score <= EXPOSURE_LIMITS[unit.name], line


def test_make_uninstall_leaves_no_cdi_spec_whose_hook_it_removed(tmp_path: Path) -> None:
    """The installed plugin's spec names a hook under PREFIX: `make uninstall` removes that spec (through the
    installed `kubenode deviceplugin remove-cdi-specs`, reading the plugin's config) before PREFIX, and
    leaves every other file in the spec dir alone."""
    prefix, bindir, unitdir, cdi_dir = (tmp_path / name for name in ("prefix", "bin", "units", "cdi"))
    (prefix / "bin").mkdir(parents=True)
    kubenode = prefix / "bin" / "kubenode"  # stands in for the venv's command: this checkout's CLI
    kubenode.write_text(f'#!/bin/sh\ncd {ROOT} && exec {sys.executable} -m cli.main "$@"\n')
    kubenode.chmod(0o755)
    bindir.mkdir()
    (bindir / "kubenode").symlink_to(kubenode)
    unitdir.mkdir()
    for unit in UNITS:
        shutil.copy(unit, unitdir)
    config = tmp_path / "deviceplugin.yaml"
    config.write_text(
        "version: v1\nresources:\n  - name: kubenode.io/cpu\n    backend: cpu\n"
        f"    cpu: {{cdi: true, cdiSpecDir: {cdi_dir}}}\n"
    )
    python = str(prefix / "bin" / "python3.11")
    installed_hook = HookCommand(python, isolated_argv(python, str(prefix / "lib" / "site-packages")))
    spec = CpusetSpec(cdi_dir, spec_file_name("kubenode.io/cpu"), installed_hook)
    spec.add(frozenset({0}))
    (cdi_dir / "vendor.json").write_text('{"cdiVersion": "0.5.0", "kind": "example.com/x", "devices": []}')

    result = subprocess.run(
        ["make", "--no-print-directory", "uninstall", f"PREFIX={prefix}", f"BINDIR={bindir}",
         f"UNITDIR={unitdir}", f"PLUGIN_CONFIG={config}", "SYSTEMCTL=true"],
        cwd=ROOT, capture_output=True, text=True, timeout=60,
    )  # fmt: skip

    assert result.returncode == 0, result.stdout + result.stderr
    assert f"removed {spec.path}" in result.stdout
    assert sorted(p.name for p in cdi_dir.iterdir()) == ["vendor.json"]
    assert not prefix.exists() and list(bindir.iterdir()) == [] and list(unitdir.iterdir()) == []
