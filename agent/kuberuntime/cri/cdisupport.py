"""Whether the CRI runtime applies CDI itself: the agent's `criAppliesCdi` setting, or the runtime's answers.

`auto` (the default) decides from the runtime's Version and, for containerd 1.7, its Status:
  containerd 2.x            yes (enable_cdi defaults to true);
  containerd 1.7            as its CRI config says: Status(verbose) info["config"] holds `enableCDI`;
  containerd 1.6 and older  no (it has no CDI: Debian 12's 1.6.20 is the one the tests run);
  cri-o 1.23 and newer      yes (CDI is always on);
  anything else             no: the agent resolves the names itself, which any runtime can take.
`true` and `false` settle it without asking. The kubelet never asks: it passes CDIDevices and trusts the
runtime; we ask because a runtime that drops the field would start the container without its devices.
`CdiForRuntime.prepare(resources)` is what the CRI runtime calls before CreateContainer: it decides once
(at the first container with CDI names), then keeps the names for a runtime that applies them or has the
agent resolve them (agent/cm/cdidevices.py; CdiResolutionError passes through). Through CRI a spec's hooks
cannot run: that is logged, and the container starts without them.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Callable, Mapping
from typing import Any

from agent.container.resources import ContainerResources
from agent.kuberuntime.cri.client import CRIError
from kubenode.api.cri.v1 import api_pb2 as cri

log = logging.getLogger(__name__)

SETTINGS = ("auto", "true", "false")
_VERSION = re.compile(r"v?(\d+)\.(\d+)")


def _major_minor(version: str) -> tuple[int, int]:
    found = _VERSION.match(version.strip())
    return (int(found.group(1)), int(found.group(2))) if found else (0, 0)


def containerd_enables_cdi(info: Mapping[str, str]) -> bool:
    """containerd 1.7's verbose Status: its CRI plugin's config, as JSON, under "config"."""
    try:
        config = json.loads(info.get("config") or "{}")
    except ValueError:
        return False
    return isinstance(config, dict) and config.get("enableCDI") is True


def runtime_applies_cdi(
    setting: str, version: cri.VersionResponse, status_info: Callable[[], Mapping[str, str]]
) -> bool:
    """See the module's docstring; `status_info` is asked only where the answer depends on it."""
    if setting != "auto":
        return setting == "true"
    name = version.runtime_name.lower()
    release = _major_minor(version.runtime_version)
    if name == "containerd":
        if release >= (2, 0):
            return True
        return release >= (1, 7) and containerd_enables_cdi(status_info())
    if name in ("cri-o", "crio"):
        return release >= (1, 23)
    return False


class CdiForRuntime:
    def __init__(
        self,
        resolve: Callable[[ContainerResources], ContainerResources] | None,
        setting: str,
        version: Callable[[], cri.VersionResponse],
        call: Callable[[str, Any], Any],
    ) -> None:
        self._resolve = resolve  # None: names always go to the runtime (no resolver wired)
        self._setting = setting
        self._version = version
        self._call = call
        self.applies: bool | None = None  # decided once the runtime answers

    def prepare(self, resources: ContainerResources) -> ContainerResources:
        """The resources as this runtime takes them (see the module's docstring)."""
        if not resources.cdi_devices or self._resolve is None:
            return resources
        if self.applies is None:
            version = self._version()
            self.applies = runtime_applies_cdi(self._setting, version, self._status_info)
            log.info(
                "%s %s: CDI devices %s",
                version.runtime_name,
                version.runtime_version,
                "applied by the runtime" if self.applies else "resolved by the agent",
            )
        if self.applies:
            return resources
        resolved = self._resolve(resources)
        if resolved.cdi_edits is not None and resolved.cdi_edits.hooks:
            hooks = ", ".join(h.path for h in resolved.cdi_edits.hooks)
            log.warning("CDI hooks not run (CRI carries no hooks; enable CDI in the runtime): %s", hooks)
        return resolved

    def _status_info(self) -> dict[str, str]:
        """The runtime's verbose Status info; empty where it refuses one (then CDI counts as off)."""
        try:
            return dict(self._call("Status", cri.StatusRequest(verbose=True)).info)
        except CRIError as exc:
            if exc.unavailable:
                raise
            log.warning("asking the runtime whether it applies CDI: %s; the agent resolves CDI names", exc)
            return {}
