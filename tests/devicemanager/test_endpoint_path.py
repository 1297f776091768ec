"""Deliberate difference from the kubelet (docs/devicemanager.md): a Register endpoint with '/' is refused,
even one that stays inside the directory, and the message says that the kubelet would take it."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from agent.cm.devicemanager import DeviceManager
from tests.conformance.fake_device_plugin import FakePlugin
from tests.devicemanager.test_registration import rejection

DOCS = Path(__file__).resolve().parents[2] / "docs/devicemanager.md"


def test_an_endpoint_below_the_directory_is_refused_with_the_reason(
    make_manager: Callable[..., DeviceManager], make_plugin: Callable[..., FakePlugin]
) -> None:
    make_manager()
    plugin = make_plugin()
    plugin.endpoint = "sub/plugin.sock"
    details = rejection(plugin).details()
    assert details.startswith('the Endpoint "sub/plugin.sock" is invalid')
    assert "the kubelet also takes a path below it" in details and "docs/devicemanager.md" in details
    assert "A Register `endpoint` must be a bare socket file name" in DOCS.read_text()
