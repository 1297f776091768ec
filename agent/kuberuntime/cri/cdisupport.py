"""Whether the CRI runtime applies CDI itself: the agent's `criAppliesCdi` setting, or the runtime's answers.

`auto` (the default) decides from the runtime's Version and, for containerd 1.7, its Status:
  containerd 2.x            yes (enable_cdi defaults to true);
  containerd 1.7            as its CRI config says: Status(verbose) info["config"] holds `enableCDI`;
  containerd 1.6 and older  no (it has no CDI: Debian 12's 1.6.20 is the one the tests run);
  cri-o 1.23 and newer      yes (CDI is always on);
  anything else             no: the agent resolves the names itself, which any runtime can take.
`true` and `false` settle it without asking. The kubelet never asks: it passes CDIDevices and trusts the
runtime; we ask because a runtime that drops the field would start the container without its devices.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping

from kubenode.api.cri.v1 import api_pb2 as cri

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
