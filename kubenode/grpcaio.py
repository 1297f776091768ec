"""A `grpc.aio` server on its own event-loop thread, driven from synchronous code.

A synchronous `grpc.server` gives every RPC a pool thread for its whole life, so a handful
of idle streams (ListAndWatch) or slow calls (a Register whose dial-back hangs) starve
everything else. With grpc.aio an open stream or a pending await costs a coroutine, not a
thread; the daemons around it are synchronous, so `AioServer` runs the loop on a
background thread and offers the synchronous server's calls: `add_insecure_port`,
`start`, and `stop(grace)` returning a `threading.Event` set once it has stopped.
Blocking work inside a handler must go through `run_blocking` (a bounded executor) or a
thread of its own, never run on the loop.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable, Coroutine
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

import grpc

T = TypeVar("T")

STARTUP_TIMEOUT_S = 10.0


async def in_thread(fn: Callable[..., T], *args: Any) -> T:
    """Await a blocking call run on a thread of its own (for calls bounded only by their own deadline,
    which must not queue behind one another on a shared pool)."""
    loop = asyncio.get_running_loop()
    future: asyncio.Future[T] = loop.create_future()

    def settle(set_outcome: Callable[[Any], None], outcome: Any) -> None:
        if not future.done():
            set_outcome(outcome)

    def run() -> None:
        try:
            result = fn(*args)
        except BaseException as exc:  # delivered to the awaiting coroutine
            loop.call_soon_threadsafe(settle, future.set_exception, exc)
        else:
            loop.call_soon_threadsafe(settle, future.set_result, result)

    threading.Thread(target=run, name=getattr(fn, "__name__", "blocking-call"), daemon=True).start()
    return await future


class AioServer:
    def __init__(self, name: str, *, blocking_workers: int = 4) -> None:
        self.name = name
        self.loop = asyncio.new_event_loop()
        self.executor = ThreadPoolExecutor(max_workers=blocking_workers, thread_name_prefix=f"{name}-call")
        self._thread = threading.Thread(target=self.loop.run_forever, name=f"{name}-aio", daemon=True)
        self._thread.start()

        async def make() -> grpc.aio.Server:
            return grpc.aio.server()

        self._server: grpc.aio.Server = self.call(make())

    def add_servicers(self, add: Callable[[grpc.aio.Server], None]) -> None:
        """Register servicers (e.g. a generated `add_XServicer_to_server`), before `start`."""

        async def run() -> None:
            add(self._server)

        self.call(run())

    def call(self, coro: Coroutine[Any, Any, T], timeout: float | None = STARTUP_TIMEOUT_S) -> T:
        """Run a coroutine on the server's loop and wait for its result (from another thread)."""
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout)

    async def run_blocking(self, fn: Callable[..., T], *args: Any) -> T:
        """Await a blocking function on the bounded executor (for short calls such as Allocate)."""
        return await self.loop.run_in_executor(self.executor, fn, *args)

    def add_insecure_port(self, address: str) -> int:
        async def add() -> int:
            port: int = self._server.add_insecure_port(address)
            return port

        return self.call(add())

    def start(self) -> None:
        self.call(self._server.start())

    def stop(self, grace: float | None) -> threading.Event:
        """Stop serving (in-flight calls get `grace` seconds), end the loop; the event is set when done."""
        done = threading.Event()

        async def stop() -> None:
            try:
                await self._server.stop(grace)
                # Streams that outlived the grace: end them here rather than destroy them with the loop.
                tasks = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
                for task in tasks:
                    task.cancel()
                if tasks:
                    await asyncio.wait(tasks, timeout=1.0)
            finally:
                self.loop.call_soon(self.loop.stop)

        def finish() -> None:
            self._thread.join()
            self.loop.close()
            self.executor.shutdown(wait=False, cancel_futures=True)
            done.set()

        if self.loop.is_closed() or not self._thread.is_alive():
            done.set()
            return done
        asyncio.run_coroutine_threadsafe(stop(), self.loop)
        threading.Thread(target=finish, name=f"{self.name}-stop", daemon=True).start()
        return done
