"""The hardened units under a real systemd: a Debian machine booted with systemd-nspawn
(tests/systemd/nspawn.py) runs both units as shipped. The plugin registers with the agent's device
manager and advertises its CPUs (a manifest pod that asks for one of them runs only if it does, and gets
the CPU Allocate chose); the agent runs that pod in a pod cgroup below its own. Heavy: the rootfs is
extracted from the cached tar, kubenode installed from wheels into a venv, then booted: 2-4 minutes.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.systemd.nspawn import Machine, wait_for

PLUGIN_CONFIG = """version: v1
kubeletDir: /var/lib/kubenode/device-plugins
resources:
  - name: kubenode.io/cpu
    backend: cpu
"""
POD = """apiVersion: v1
kind: Pod
metadata: {name: pinned}
spec:
  containers:
    - name: sleeper
      image: busybox
      command: [sleep, "3601"]
      resources:
        limits: {kubenode.io/cpu: 1}
"""
STATUS = (
    "/opt/kubenode/bin/python",
    "-c",
    "import urllib.request as u; print(u.urlopen('http://127.0.0.1:10366/pods').read().decode())",
)


pytestmark = pytest.mark.timeout(600)


@pytest.fixture(scope="module")
def machine() -> Iterator[Machine]:
    missing = [tool for tool in ("systemd-nspawn", "mmdebstrap", "nsenter") if shutil.which(tool) is None]
    if missing:
        pytest.fail(f"needs {', '.join(missing)}: run `make podman-deps` as root", pytrace=False)
    machine = Machine(
        {"/etc/kubenode/deviceplugin.yaml": PLUGIN_CONFIG, "/etc/kubenode/manifests/pinned.yaml": POD},
        cgroup_units=["kubenode-agent.service"],
    )
    try:
        machine.boot()
        yield machine
    finally:
        machine.close()


def test_hardened_units_run_a_pod_on_an_advertised_cpu(machine: Machine) -> None:
    states = wait_for(
        ("systemctl", "is-active", "kubenode-agent", "kubenode-deviceplugin"), machine, "active\nactive", 180
    )
    assert states.startswith("active\nactive"), states + machine.console()
    output = wait_for(STATUS, machine, '"Running"', 120)
    journal = machine.exec("journalctl", "--no-pager", "-u", "kubenode-agent", "-u", "kubenode-deviceplugin")
    assert '"Running"' in output, output + journal.stdout[-4000:]
    [pod] = [p for p in json.loads(output)["items"] if p["metadata"]["name"] == "pinned"]
    [device] = pod["kubenode"]["devices"]["sleeper"]["kubenode.io/cpu"]  # advertised and allocated
    cpu = device.removeprefix("cpu")
    # On the host: the pod's cgroup below the agent's, holding `sleep 3601`, pinned to that CPU.
    [procs] = [
        path
        for path in machine.host_cgroup("cpuset").rglob("cgroup.procs")
        if "-pod" in str(path.parent.relative_to(machine.host_cgroup("cpuset"))) and path.read_text().split()
    ]
    [pid] = procs.read_text().split()
    assert Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")[:2] == [b"sleep", b"3601"]
    status = Path(f"/proc/{pid}/status").read_text()
    assert f"Cpus_allowed_list:\t{cpu}\n" in status, status
