"""`kubenode conformance` passes against our cpu plugin with CDI on, and its Allocates left valid entries."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from deviceplugin.cdi import spec_file_name

REPO = Path(__file__).resolve().parents[2]


def test_conformance_passes_with_cdi_on(tmp_path: Path) -> None:
    cdi_dir = tmp_path / "cdi"
    config = tmp_path / "cpu-cdi.yaml"
    config.write_text(
        "version: v1\n"
        "resources:\n"
        "  - name: kubenode.io/cpu\n"
        "    backend: cpu\n"
        f"    cpu: {{cdi: true, cdiSpecDir: {cdi_dir}}}\n"
    )
    plugin = f"{sys.executable} -m cli.main deviceplugin --config {config}"
    out = subprocess.run(
        [sys.executable, "-m", "cli.main", "--log-level", "ERROR", "conformance", "--plugin-cmd", plugin],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=REPO,
    )
    assert out.returncode == 0, out.stdout + out.stderr
    assert "FAIL" not in out.stdout
    assert "PASS  allocate.env_and_paths" in out.stdout
    spec = json.loads((cdi_dir / spec_file_name("kubenode.io/cpu")).read_text())
    assert spec["kind"] == "kubenode.io/cpuset" and spec["devices"]
    for device in spec["devices"]:
        (hook,) = device["containerEdits"]["hooks"]
        assert os.path.isabs(hook["path"]) and os.access(hook["path"], os.X_OK)
        assert hook["args"][-1] == device["name"].replace("_", ",")
