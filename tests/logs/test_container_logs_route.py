"""`kubectl logs` of a process container through the agent's containerLogs route: a running container's
last line that it is still writing is not shown in part (the interop run's `--tail=5` read `37653` of
`376533`); a terminated container's last line is its output, shown whole as it is."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

from agent.server.containerlogs import ContainerLogs
from agent.server.httpapi import StreamRequest


def _pods(log: Path, state: dict[str, Any]) -> dict[str, Any]:
    status = {"name": "c", "logPath": str(log), "restartCount": 0, "state": state}
    return {
        "items": [
            {"metadata": {"namespace": "default", "name": "p"}, "status": {"containerStatuses": [status]}}
        ]
    }


def _get(logs: ContainerLogs, query: dict[str, list[str]]) -> bytes:
    async def read() -> bytes:
        request = StreamRequest("/containerLogs/default/p/c", query, {}, lambda: False)
        code, _, body = await logs.route(request)
        assert code == 200, body
        if isinstance(body, bytes):
            return body
        assert isinstance(body, AsyncIterator)
        return b"".join([chunk async for chunk in body])

    return asyncio.run(read())


def test_a_running_containers_half_written_last_line_is_held_back(tmp_path: Path) -> None:
    log = tmp_path / "0.log"
    log.write_bytes(b"".join(b"line-%d\n" % i for i in range(10)) + b"line-1")
    running = ContainerLogs(lambda: _pods(log, {"running": {"startedAt": "2026-12-07T00:00:00Z"}}))
    assert _get(running, {"tailLines": ["3"]}) == b"line-7\nline-8\nline-9\n"
    assert _get(running, {}).endswith(b"line-9\n")
    assert _get(running, {"tailLines": ["0"]}) == b""


def test_a_terminated_containers_last_line_is_shown_whole(tmp_path: Path) -> None:
    log = tmp_path / "0.log"
    log.write_bytes(b"a\nb\nno newline at the end")
    done = ContainerLogs(lambda: _pods(log, {"terminated": {"exitCode": 0}}))
    assert _get(done, {"tailLines": ["2"]}) == b"b\nno newline at the end"
