"""`/containerLogs/<namespace>/<pod>/<container>`: container logs for the API server, as the kubelet does.

    request (authenticated and authorized by the secure endpoint, agent/server/server.py)
            -> the pod and container from the agent's status (404 if unknown)
            -> the log file: `<restartCount>.log`, or with `previous` the one before (400 if none)
            -> tailLines, sinceSeconds, timestamps, limitBytes applied; with `follow` new output is
               streamed until the container stops (or restarts) or the client goes.

CRI pods' files (under podLogsDir) are in the CRI format and are unwrapped line by line
(agent/kuberuntime/crilog.py), their own times serving `timestamps`. Their rotation renames the file (the
runtime reopens it, agent/logs/renaming.py): a read goes back through the rotated files (gzipped ones
too) as a process pod's does, and a follower reads the renamed file to its end, then the new one.
The process pods' log files are the processes' raw output, with no time per line (a CRI runtime writes
one). So `timestamps` prefixes a followed line with the time it was read, and a line already in the file
with the file's last write time (an upper bound); `sinceSeconds` keeps a file only if it was written to
within the window, and the lines followed after it. Both are approximations, and say so here.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncIterator, Callable, Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from agent.kuberuntime import crilog
from agent.logs.reader import Follower, RenamedFollower, snapshot
from agent.logs.rotation import lock_for
from agent.server.httpapi import StreamRequest

log = logging.getLogger(__name__)

PREFIX = "/containerLogs/"
FOLLOW_POLL_S = 0.2
CHUNK = 64 * 1024

Answer = tuple[int, str, bytes | AsyncIterator[bytes]]


def _stamp(when: float) -> bytes:
    return datetime.fromtimestamp(when, UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ").encode() + b" "


class ContainerLogs:
    def __init__(self, pods: Callable[[], Mapping[str, Any]], cri_root: Path | None = None) -> None:
        self._pods = pods  # the agent's status_json
        # CRI pods' logs (under the kubelet's podLogsDir) are in the CRI format: each line is unwrapped.
        self._cri_root = cri_root

    async def route(self, request: StreamRequest) -> Answer:
        parts = request.path.removeprefix(PREFIX).split("/")
        if len(parts) != 3 or not all(parts):
            return 400, "text/plain", b"expected /containerLogs/<namespace>/<pod>/<container>\n"
        namespace, pod, container = parts
        try:
            options = _options(request.query)
        except ValueError as exc:
            return 400, "text/plain", f"{exc}\n".encode()
        loop = asyncio.get_running_loop()
        status = await loop.run_in_executor(None, self._container_status, namespace, pod, container)
        if status is None:
            return 404, "text/plain", f'container "{container}" in pod "{pod}" not found\n'.encode()
        log_path = status.get("logPath")
        if not log_path:
            return 404, "text/plain", f'container "{container}" in pod "{pod}" has no log yet\n'.encode()
        current = Path(log_path)
        if options["previous"]:
            restarts = int(status.get("restartCount") or 0)
            previous = current.with_name(f"{int(current.stem) - 1}.log") if current.stem.isdigit() else None
            if restarts == 0 or previous is None or not previous.exists():
                message = f'previous terminated container "{container}" in pod "{pod}" not found\n'
                return 400, "text/plain", message.encode()
            return 200, "text/plain", self._stream(previous, options, None, request, live=False)
        running = "running" in (status.get("state") or {})

        def still_this_container() -> bool:
            now = self._container_status(namespace, pod, container)
            return bool(now and now.get("logPath") == log_path and "running" in (now.get("state") or {}))

        follow = still_this_container if options["follow"] and running else None
        return 200, "text/plain", self._stream(current, options, follow, request, live=running)

    def _container_status(self, namespace: str, pod: str, container: str) -> dict[str, Any] | None:
        for item in self._pods().get("items") or []:
            meta = item.get("metadata") or {}
            if meta.get("namespace") != namespace or meta.get("name") != pod:
                continue
            status = item.get("status") or {}
            for c in [*(status.get("containerStatuses") or []), *(status.get("initContainerStatuses") or [])]:
                if c.get("name") == container:
                    return dict(c)
        return None

    async def _stream(
        self,
        path: Path,
        options: Mapping[str, Any],
        still_running: Callable[[], bool] | None,
        request: StreamRequest,
        *,
        live: bool,
    ) -> AsyncIterator[bytes]:
        limit = options["limitBytes"]
        sent = 0
        # Across the log's rotations (agent/logs): the rotated files, then the live one. A CRI log's follower
        # opens the live file under the same lock, so that a rename cannot come between.
        cri = self._cri_root is not None and path.is_relative_to(self._cri_root)
        tail = options["tailLines"]
        with lock_for(path):
            # A running container's last line may be one it is still writing: one line more is read, so that
            # `tailLines` complete lines are left once that one is held back.
            data, offset = snapshot(path, tail + 1 if live and tail else tail)
            renamed = RenamedFollower(path, offset) if cri and still_running is not None else None
        try:
            written = path.stat().st_mtime
        except OSError:
            written = time.time()
        since = options["sinceSeconds"]
        if since is not None and written < time.time() - since:
            data = b""
        lines = data.splitlines(keepends=True)
        pending = b""
        if live and lines and not lines[-1].endswith(b"\n"):
            # A line the container is still writing is not shown in part (a CRI runtime buffers a line until
            # its newline): with `follow` the follower reads its rest and it is sent whole then.
            pending = lines.pop()
        if tail is not None:
            lines = lines[-tail:] if tail else []
        for line in lines:
            if cri:
                chunk = crilog.content(line, options["timestamps"])
            else:
                chunk = (_stamp(written) if options["timestamps"] else b"") + line
            if limit is not None:
                chunk = chunk[: max(0, limit - sent)]
            if chunk:
                sent += len(chunk)
                yield chunk
        if still_running is None:
            return
        loop = asyncio.get_running_loop()
        checked = time.monotonic()
        follower = renamed if renamed is not None else Follower(path, offset)
        try:
            while not request.disconnected() and (limit is None or sent < limit):
                new = follower.read(CHUNK)
                if new:
                    pending += new
                    *complete, pending = pending.split(b"\n")
                    now = time.time()
                    out = b"".join(
                        crilog.content(line, options["timestamps"])
                        if cri
                        else (_stamp(now) if options["timestamps"] else b"") + line + b"\n"
                        for line in complete
                    )
                    if limit is not None:
                        out = out[: limit - sent]
                    if out:
                        sent += len(out)
                        yield out
                    continue
                if time.monotonic() - checked > 1.0:
                    checked = time.monotonic()
                    if not await loop.run_in_executor(None, still_running):
                        if pending:
                            yield pending
                        return
                await asyncio.sleep(FOLLOW_POLL_S)
        finally:
            follower.close()


def _flag(query: Mapping[str, list[str]], name: str) -> bool:
    value = (query.get(name) or ["false"])[0].lower()
    if value not in ("true", "false", "1", "0", ""):
        raise ValueError(f"{name}: must be true or false, got {value!r}")
    return value in ("true", "1", "")


def _number(query: Mapping[str, list[str]], name: str) -> int | None:
    if name not in query:
        return None
    try:
        value = int(query[name][0])
    except ValueError:
        raise ValueError(f"{name}: must be an integer, got {query[name][0]!r}") from None
    if value < 0 or (name != "tailLines" and value == 0):
        raise ValueError(f"{name}: must be {'at least 0' if name == 'tailLines' else 'positive'}")
    return value


def _options(query: Mapping[str, list[str]]) -> dict[str, Any]:
    return {
        "follow": _flag(query, "follow"),
        "previous": _flag(query, "previous"),
        "timestamps": _flag(query, "timestamps"),
        "tailLines": _number(query, "tailLines"),
        "sinceSeconds": _number(query, "sinceSeconds"),
        "limitBytes": _number(query, "limitBytes"),
    }
