"""Why a pod waits for a device resource: never registered, restored from the checkpoint but not
re-registered since the restart, or registered without its first device list yet."""

from __future__ import annotations

from collections.abc import Callable

from agent.cm.devicemanager import DeviceManager
from tests.conformance.fake_device_plugin import FakePlugin

RES = "example.com/fake"


def test_the_message_says_the_plugin_has_not_re_registered_since_the_restart(
    make_manager: Callable[..., DeviceManager], make_plugin: Callable[..., FakePlugin]
) -> None:
    first = make_manager()
    assert first.why_unavailable(RES) == f"no device plugin has registered {RES} yet"
    plugin = make_plugin()
    plugin.register()
    assert first.wait_for_resource(RES, 5)
    first.stop()

    second = make_manager()  # same state dir: RES comes back from the checkpoint, with no plugin
    assert second.why_unavailable(RES) == (
        f"the device plugin of {RES} has not re-registered since the restart ({RES} is known from the"
        " checkpoint only)"
    )
    assert (
        second.why_unavailable("example.com/other") == "no device plugin has registered example.com/other yet"
    )
    plugin.serve()  # the restart removed its socket
    plugin.register()
    assert second.wait_for_resource(RES, 5)
    plugin.stop()
    assert second.wait_for(lambda: not any(r.connected for r in second.resources()), 5)
    # Gone after re-registering: no longer "since the restart".
    assert "since the restart" not in second.why_unavailable(RES)
