"""Deliberately broken DRA drivers for the conformance suite: `python brokendriver.py MODE`.

MODE `wrongtype`: GetInfo says CSIPlugin. `noversion`: advertises only v9.DRAPlugin. `failsunprepare`:
a correct registration whose unprepare of any claim fails. All read REGISTRY_DIR and PLUGIN_DIR.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import grpc

from kubenode.api.dra.v1 import api_pb2 as v1
from kubenode.api.dra.v1 import api_pb2_grpc as v1_grpc
from kubenode.api.pluginregistration.v1 import api_pb2 as reg
from kubenode.api.pluginregistration.v1 import api_pb2_grpc as reg_grpc
from kubenode.stopsignal import wait_for_stop


class Registration(reg_grpc.RegistrationServicer):
    def __init__(self, info: Any) -> None:
        self.info = info

    def GetInfo(self, request: Any, context: Any) -> Any:
        return self.info

    def NotifyRegistrationStatus(self, request: Any, context: Any) -> Any:
        return reg.RegistrationStatusResponse()


class Dra(v1_grpc.DRAPluginServicer):
    def NodePrepareResources(self, request: Any, context: Any) -> Any:
        response = v1.NodePrepareResourcesResponse()
        for claim in request.claims:
            response.claims[claim.uid].error = "this driver prepares nothing"
        return response

    def NodeUnprepareResources(self, request: Any, context: Any) -> Any:
        response = v1.NodeUnprepareResourcesResponse()
        for claim in request.claims:
            response.claims[claim.uid].error = "unprepare always fails here"
        return response


def main(mode: str) -> int:
    registry, plugins = Path(os.environ["REGISTRY_DIR"]), Path(os.environ["PLUGIN_DIR"])
    endpoint = plugins / "broken.sock"
    kind = "CSIPlugin" if mode == "wrongtype" else "DRAPlugin"
    versions = ["v9.DRAPlugin"] if mode == "noversion" else ["v1.DRAPlugin"]
    server = grpc.server(ThreadPoolExecutor(max_workers=2))
    v1_grpc.add_DRAPluginServicer_to_server(Dra(), server)
    info = reg.PluginInfo(
        type=kind, name="broken.example.com", endpoint=str(endpoint), supported_versions=versions
    )
    reg_grpc.add_RegistrationServicer_to_server(Registration(info), server)
    server.add_insecure_port(f"unix://{endpoint}")
    server.add_insecure_port(f"unix://{registry / 'broken.example.com-reg.sock'}")
    server.start()
    done = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: done.set())
    wait_for_stop(done)  # in slices: a SIGTERM may land on a gRPC thread (kubenode/stopsignal.py)
    server.stop(None)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
