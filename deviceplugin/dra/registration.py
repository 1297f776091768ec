"""The plugin-registration service (k8s.io/kubelet/pkg/apis/pluginregistration/v1) of one driver.

The driver serves `Registration` on `<registry-dir>/<driver>-reg.sock`; the kubelet's plugin watcher
(or kubenode's agent, agent/cm/dra/watcher.py) sees the socket appear, calls `GetInfo` (type DRAPlugin,
the driver's name, the DRA socket's path, the service versions) and then `NotifyRegistrationStatus`,
which is only recorded here: a driver keeps serving whether or not a kubelet has taken it.
"""

from __future__ import annotations

import logging
import threading
from typing import Any

import grpc

from kubenode.api.pluginregistration.v1 import api_pb2 as reg
from kubenode.api.pluginregistration.v1 import api_pb2_grpc as reg_grpc

log = logging.getLogger(__name__)

DRA_PLUGIN_TYPE = "DRAPlugin"  # pluginregistration/v1 constants.go


class RegistrationServicer(reg_grpc.RegistrationServicer):
    def __init__(self, driver: str, endpoint: str, versions: tuple[str, ...]) -> None:
        self.driver = driver
        self.endpoint = endpoint
        self.versions = versions
        self.registered = threading.Event()
        self.last_error = ""

    def GetInfo(self, request: Any, context: grpc.ServicerContext) -> Any:
        return reg.PluginInfo(
            type=DRA_PLUGIN_TYPE,
            name=self.driver,
            endpoint=self.endpoint,
            supported_versions=list(self.versions),
        )

    def NotifyRegistrationStatus(self, request: Any, context: grpc.ServicerContext) -> Any:
        if request.plugin_registered:
            log.info("driver %s registered with the kubelet", self.driver)
            self.last_error = ""
            self.registered.set()
        else:
            log.warning("driver %s: the kubelet refused the registration: %s", self.driver, request.error)
            self.last_error = request.error
            self.registered.clear()
        return reg.RegistrationStatusResponse()
