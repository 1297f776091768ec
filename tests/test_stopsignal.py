"""kubenode/stopsignal.py: a SIGTERM that the kernel hands to another thread still ends the main thread's
wait, at most a slice late; one long Event.wait would sleep through it."""

from __future__ import annotations

import os
import signal
import threading
import time
from collections.abc import Iterator

import pytest

from harness.threadsignal import tgkill
from kubenode.stopsignal import STOP_CHECK_S, wait_for_stop


@pytest.fixture
def stopping() -> Iterator[threading.Event]:
    assert threading.current_thread() is threading.main_thread(), "handlers run on the main thread only"
    event = threading.Event()
    previous = signal.signal(signal.SIGTERM, lambda *_: event.set())
    yield event
    signal.signal(signal.SIGTERM, previous)


def test_a_sigterm_taken_by_another_thread_ends_the_wait_within_a_slice(stopping: threading.Event) -> None:
    def send_to_myself() -> None:
        time.sleep(0.1)  # the main thread is parked in its wait by then
        tgkill(os.getpid(), threading.get_native_id(), signal.SIGTERM)

    sender = threading.Thread(target=send_to_myself)
    started = time.monotonic()
    sender.start()
    wait_for_stop(stopping)
    took = time.monotonic() - started
    sender.join()
    assert stopping.is_set()
    assert took < 0.1 + STOP_CHECK_S + 0.5, f"the stop took {took:.2f} s"
