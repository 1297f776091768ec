"""What exec, attach and port-forward ask of a runtime: which streams a client wants.

The kubelet's streaming routes ask the runtime for a URL (CRI Exec, Attach, PortForward) and proxy the
client there; `PodRuntime.exec_url`, `attach_url` and `port_forward_url` (runtime.py) are those calls. A
runtime that answers None (the process runtime) serves the stream in the agent itself
(agent/server/remotecommand.py, attach.py, portforward.py); a URL is proxied (agent/server/streamproxy.py).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class StreamFlags:
    """The streams of an exec or attach, as the request's query names them (`tty` excludes `stderr`)."""

    stdin: bool = False
    stdout: bool = True
    stderr: bool = True
    tty: bool = False
