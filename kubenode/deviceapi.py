"""Constants of the kubelet's Device Plugin API v1beta1 and its rule for a Register endpoint (for the plugins,
the device manager, conformance).

Values follow the kubelet's pkg/apis/deviceplugin/v1beta1/constants.go and its device manager's client.
"""

from __future__ import annotations

from typing import Final

API_VERSION: Final = "v1beta1"
SUPPORTED_VERSIONS: Final = (API_VERSION,)

KUBELET_SOCKET: Final = "kubelet.sock"  # the Registration service, inside the device-plugin dir
DEFAULT_KUBELET_DIR: Final = "/var/lib/kubelet/device-plugins"
KUBELET_DIR_ENV: Final = "KUBENODE_KUBELET_DIR"  # overrides the dir for plugins started by kubenode

HEALTHY: Final = "Healthy"
UNHEALTHY: Final = "Unhealthy"
HEALTH_VALUES: Final = (HEALTHY, UNHEALTHY)

MAX_DEVICE_ID_LENGTH: Final = 63  # Device.ID, per the API's comment

PRE_START_TIMEOUT_S: Final = 30.0  # KubeletPreStartContainerRPCTimeoutInSecs
DIAL_TIMEOUT_S: Final = 10.0  # the kubelet's blocking dial of a plugin socket

MAX_ECHOED_ID: Final = 128  # characters of a caller's ID quoted back in an error
MAX_ERROR_MESSAGE: Final = 1024  # a gRPC status message stays far below the 8 KiB trailer limit


def quote_id(value: str) -> str:
    """A caller-supplied ID (device, resource, endpoint) as an error quotes it: repr, cut to MAX_ECHOED_ID."""
    if len(value) <= MAX_ECHOED_ID:
        return repr(value)
    return f"{value[:MAX_ECHOED_ID]!r}...({len(value)} characters)"


def clip_message(message: str) -> str:
    """A whole error message cut to MAX_ERROR_MESSAGE characters: the last guard for the status trailer."""
    if len(message) <= MAX_ERROR_MESSAGE:
        return message
    return f"{message[:MAX_ERROR_MESSAGE]}...(cut from {len(message)} characters)"


def is_bare_file_name(endpoint: str) -> bool:
    """An endpoint must name a socket directly inside the plugin directory."""
    return bool(endpoint) and endpoint not in (".", "..") and "/" not in endpoint and "\0" not in endpoint


def is_plugin_endpoint(endpoint: str) -> bool:
    """A RegisterRequest endpoint we accept: a bare file name in the dir that is not kubelet.sock itself."""
    return is_bare_file_name(endpoint) and endpoint != KUBELET_SOCKET
