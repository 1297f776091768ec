"""The harness's containerd: private paths, locally made images, a CRI client that names bad endpoints."""

from __future__ import annotations

from pathlib import Path

import pytest

from agent.kuberuntime.cri.client import CRIClient, CRIError, socket_path
from harness.containerd import ContainerdProcess
from harness.ociimage import BUSYBOX_IMAGE, PAUSE_IMAGE
from kubenode.api.cri.v1 import api_pb2 as cri


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


def test_endpoints_must_be_unix_sockets() -> None:
    assert socket_path("unix:///run/containerd/containerd.sock") == "/run/containerd/containerd.sock"
    for bad in ("tcp://127.0.0.1:1", "unix://relative.sock", "containerd.sock"):
        with pytest.raises(ValueError, match="container runtime endpoint"):
            socket_path(bad)
