"""The device plugin process stays small: it must not load the kubernetes client (about 12 MiB of RSS,
which took the plugin past its 60 MiB goal once), which only the agent's and scheduler's parsers need."""

from __future__ import annotations

from tests.importprobe import modules_loaded

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
    code = f"import importlib\nfor name in {PLUGIN_MODULES!r}: importlib.import_module(name)\n"
    _, loaded = modules_loaded(code, ["kubernetes"])
    assert loaded == [], f"the device plugin imports the kubernetes client: {loaded}"
