"""Kubernetes' WebSocket channel protocol, shared by exec and attach (remotecommand.py, attach.py,
streamproxy.py): the subprotocols, the channel numbers, the error channel's metav1.Status, and the one-line
refusal of an upgrade.

Framing (apimachinery's remotecommand constants; client-go tools/remotecommand): every message is binary,
its first byte a channel: 0 stdin (client to server), 1 stdout, 2 stderr, 3 error, 4 resize (client to
server, JSON `{"Width": w, "Height": h}`). v5 adds 255: `[255, channel]` closes that channel.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from aiohttp import web

from agent.container.streaming import StreamFlags

PROTOCOLS = ("v5.channel.k8s.io", "v4.channel.k8s.io")
STDIN, STDOUT, STDERR, ERROR, RESIZE, CLOSE = 0, 1, 2, 3, 4, 255
MAX_MESSAGE = 4 * 2**20


# Each stream flag under the name kube-apiserver gives the kubelet (`input`, `output`, `error`, `tty`, each
# "1": k8s.io/api core/v1 ExecStdinParam..ExecTTYParam, set by pkg/registry/core/pod/strategy.go streamParams)
# and under the one kubectl gives the API server (`stdin`, `stdout`, `stderr`, `tty`, "true"), which kubenode
# apiserver passes on unchanged. Either spelling turns a stream on.
FLAG_NAMES = {
    "stdin": ("input", "stdin"),
    "stdout": ("output", "stdout"),
    "stderr": ("error", "stderr"),
    "tty": ("tty",),
}


def flag(query: Mapping[str, str], stream: str) -> bool:
    return any(str(query.get(name, "")).lower() in ("1", "true") for name in FLAG_NAMES[stream])


def stream_flags(query: Mapping[str, str]) -> StreamFlags:
    """The streams an exec or attach request asks for (a stream not named is off, as the kubelet reads it)."""
    return StreamFlags(
        stdin=flag(query, "stdin"), stdout=flag(query, "stdout"), stderr=flag(query, "stderr"),
        tty=flag(query, "tty"),
    )  # fmt: skip


def status(code: int | None, message: str = "") -> bytes:
    """The error channel's metav1.Status for an exit code (None: the command did not run)."""
    if code == 0:
        body: dict[str, Any] = {"metadata": {}, "status": "Success"}
    elif code is None:
        body = {"metadata": {}, "status": "Failure", "message": message, "reason": "InternalError",
                "code": 500}  # fmt: skip
    else:
        body = {
            "metadata": {},
            "status": "Failure",
            "message": f"command terminated with non-zero exit code: {message}exit code {code}",
            "reason": "NonZeroExitCode",
            "details": {"causes": [{"reason": "ExitCode", "message": str(code)}]},
        }
    return bytes([ERROR]) + json.dumps(body).encode()


# A refused upgrade's reason also goes in this header: a WebSocket client (the API server's aiohttp) is given
# the status and headers of a failed handshake, not its body.
REFUSAL_HEADER = "X-Kubenode-Refusal"


def refuse(code: int, text: str) -> web.Response:
    line = " ".join(text.split())
    return web.Response(
        status=code, text=line + "\n", content_type="text/plain", headers={REFUSAL_HEADER: line}
    )
