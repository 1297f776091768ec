"""The device plugin process stays small: it must not load the kubernetes client (about 12 MiB of RSS,
which took the plugin past its 60 MiB goal once), which only the agent's and scheduler's parsers need."""

from __future__ import annotations

import subprocess
import sys

PLUGIN_MODULES = (
    "deviceplugin.cli",
    "deviceplugin.manager",
    "deviceplugin.config",
    "deviceplugin.discover",
    "deviceplugin.backends.cpu",
    "deviceplugin.backends.gpu",
    "deviceplugin.backends.static",
)


def test_plugin_modules_do_not_import_the_kubernetes_client() -> None:
    code = (
        "import importlib, sys\n"
        f"for name in {PLUGIN_MODULES!r}: importlib.import_module(name)\n"
        "print(sorted(m for m in sys.modules if m == 'kubernetes' or m.startswith('kubernetes.')))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True).stdout
    assert out.strip() == "[]", f"the device plugin imports the kubernetes client: {out.strip()}"
