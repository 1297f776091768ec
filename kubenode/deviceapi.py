"""Constants of the kubelet's Device Plugin API v1beta1 (for the plugins, the device manager, conformance).

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
