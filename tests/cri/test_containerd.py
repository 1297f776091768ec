"""The harness's containerd: private paths, locally made images, a CRI client that names bad endpoints."""

from __future__ import annotations

import re
from concurrent import futures
from pathlib import Path
from typing import Any

import grpc
import pytest

from agent.kuberuntime.cri.client import CRIClient, CRIError
from harness.containerd import ContainerdProcess
from harness.ociimage import BUSYBOX_IMAGE, PAUSE_IMAGE
from kubenode.api.cri.v1 import api_pb2 as cri
from kubenode.api.cri.v1 import api_pb2_grpc as cri_grpc
from kubenode.criendpoint import socket_path


def test_private_containerd_answers_cri_v1_with_local_images(containerd: ContainerdProcess) -> None:
    client = CRIClient.connect(containerd.endpoint)
    try:
        version = client.version()
        assert version.runtime_name == "containerd" and version.runtime_api_version == "v1"
        listed = client.call(client.images.ListImages, cri.ListImagesRequest())
        tags = {tag for image in listed.images for tag in image.repo_tags}
        assert {BUSYBOX_IMAGE, PAUSE_IMAGE} <= tags
    finally:
        client.close()
    # Nothing on the host's default paths: the socket and state live in the fixture's directory.
    assert containerd.socket.startswith(str(containerd.dir))
    assert (containerd.dir / "root").is_dir()


def test_an_endpoint_that_is_not_there_is_one_error_naming_it(tmp_path: Path) -> None:
    endpoint = f"unix://{tmp_path}/nothing.sock"
    expected = f"container runtime endpoint {endpoint}: rpc error: code = UNAVAILABLE"
    with pytest.raises(CRIError, match=expected):
        CRIClient.connect(endpoint, timeout=1.0)


class OtherVersionRuntime(cri_grpc.RuntimeServiceServicer):
    """A runtime.v1 service whose Version names another API version."""

    def Version(self, request: Any, context: Any) -> Any:
        return cri.VersionResponse(runtime_name="old", runtime_api_version="v1alpha2")


def serve(tmp_path: Path, runtime: cri_grpc.RuntimeServiceServicer | None) -> tuple[grpc.Server, str]:
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
    if runtime is not None:
        cri_grpc.add_RuntimeServiceServicer_to_server(runtime, server)
    endpoint = f"unix://{tmp_path}/runtime.sock"
    server.add_insecure_port(endpoint)
    server.start()
    return server, endpoint


def test_an_endpoint_with_another_api_version_is_one_error_naming_both(tmp_path: Path) -> None:
    server, endpoint = serve(tmp_path, OtherVersionRuntime())
    try:
        expected = f"container runtime endpoint {endpoint}: runtime API 'v1alpha2', the agent speaks CRI v1"
        with pytest.raises(CRIError, match=re.escape(expected)):
            CRIClient.connect(endpoint, timeout=5.0)
    finally:
        server.stop(None)


def test_an_endpoint_without_the_runtime_v1_service_is_one_error_naming_it(tmp_path: Path) -> None:
    server, endpoint = serve(tmp_path, None)  # as a v1alpha2-only runtime answers runtime.v1 calls
    try:
        expected = f"container runtime endpoint {endpoint}: does not serve CRI runtime.v1"
        with pytest.raises(CRIError, match=re.escape(expected)):
            CRIClient.connect(endpoint, timeout=5.0)
    finally:
        server.stop(None)


def test_endpoints_must_be_unix_sockets() -> None:
    assert socket_path("unix:///run/containerd/containerd.sock") == "/run/containerd/containerd.sock"
    for bad in ("tcp://127.0.0.1:1", "unix://relative.sock", "containerd.sock"):
        with pytest.raises(ValueError, match="container runtime endpoint"):
            socket_path(bad)
