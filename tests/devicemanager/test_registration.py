"""Register is validated like the kubelet's, over real gRPC on real unix sockets."""

from __future__ import annotations

import socket
from collections.abc import Callable
from pathlib import Path

import grpc
import pytest

from agent.cm.devicemanager import DeviceManager, RegistrationEvent
from deviceplugin.config import parse_config
from tests.conformance.fake_device_plugin import FakePlugin


def rejection(plugin: FakePlugin, **kwargs: str) -> grpc.RpcError:
    with pytest.raises(grpc.RpcError) as caught:
        plugin.register(**kwargs)
    return caught.value


def test_wrong_version_is_rejected_with_the_kubelet_message(
    make_manager: Callable[..., DeviceManager], make_plugin: Callable[..., FakePlugin]
) -> None:
    manager = make_manager()
    err = rejection(make_plugin(), version="v1alpha")
    assert err.code() == grpc.StatusCode.UNKNOWN
    assert err.details() == (
        'requested API version "v1alpha" is not supported by kubelet. Supported version is "v1beta1"'
    )
    assert manager.capacity() == {}


@pytest.mark.parametrize(
    "name",
    [
        "gpu",
        "kubernetes.io/gpu",
        "requests.example.com/gpu",
        "example.com/bad name",
        "Example.com/gpu",
        "a/b/c",
    ],
)
def test_non_extended_resource_names_are_rejected(
    name: str, make_manager: Callable[..., DeviceManager], make_plugin: Callable[..., FakePlugin]
) -> None:
    make_manager()
    assert rejection(make_plugin(), resource=name).details() == f'the ResourceName "{name}" is invalid'


def test_a_label_over_63_characters_is_accepted_by_register_and_the_plugin_config(
    make_manager: Callable[..., DeviceManager], make_plugin: Callable[..., FakePlugin]
) -> None:
    # Kubernetes limits a DNS subdomain to 253 characters in all, not each label to 63.
    name = f"{'a' * 70}.example.com/gpu"
    config = parse_config({"resources": [{"name": name, "backend": "static", "static": {"devices": []}}]})
    assert [r.name for r in config.resources] == [name]
    manager = make_manager()
    make_plugin(resource=name, endpoint="long-label.sock").register()
    assert manager.wait_for_resource(name, timeout=5)
    assert manager.capacity() == {name: 4}


def test_endpoint_must_be_a_bare_file_name(
    make_manager: Callable[..., DeviceManager], make_plugin: Callable[..., FakePlugin]
) -> None:
    make_manager()
    plugin = make_plugin()
    plugin.endpoint = "../elsewhere.sock"
    assert "Endpoint" in rejection(plugin).details()


def test_endpoint_not_serving_fails_the_dial(
    make_manager: Callable[..., DeviceManager], plugin_dir: Path, make_plugin: Callable[..., FakePlugin]
) -> None:
    make_manager(dial_timeout=0.3)
    plugin = make_plugin()
    plugin.stop()
    assert "failed to dial device plugin" in rejection(plugin).details()


def test_accepted_registration_is_answered_after_the_stream_opens(
    make_manager: Callable[..., DeviceManager], make_plugin: Callable[..., FakePlugin]
) -> None:
    events: list[RegistrationEvent] = []
    manager = make_manager(on_register=events.append)
    plugin = make_plugin(preferred_available=True)
    plugin.register()
    assert manager.wait_for_resource("example.com/fake", timeout=5)
    assert manager.capacity() == {"example.com/fake": 4}
    (event,) = events
    assert event.accepted and event.serving_at_register and event.plugin_preferred_allocation
    assert event.endpoint == plugin.endpoint


def test_start_removes_only_stale_sockets(
    plugin_dir: Path, make_manager: Callable[..., DeviceManager]
) -> None:
    stale = plugin_dir / "old-plugin.sock"
    with socket.socket(socket.AF_UNIX) as s:
        s.bind(str(stale))
    keep_file = plugin_dir / "kubelet_internal_checkpoint"
    keep_file.write_text("{}")
    (plugin_dir / "subdir").mkdir()
    manager = make_manager()
    assert not stale.exists()
    assert keep_file.read_text() == "{}"
    assert (plugin_dir / "subdir").is_dir()
    assert manager.kubelet_socket.is_socket()
