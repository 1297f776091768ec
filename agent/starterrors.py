"""One line for an agent that cannot start, naming the flag, file or privilege at fault.

`kubenode agent` and `kubenode up` both start the agent; what goes wrong then is seldom a bug but an
ordinary situation (the status port is taken, the process is not root) that deserves one sentence, not
a traceback. Bad flags and config files are found earlier (agent/apis/config.py, exit 2); these are runtime
failures (exit 1).
"""

from __future__ import annotations

import errno
import socket

from agent.cm.cgroups.api import CgroupError

ROOT_NEEDED = (
    "the agent writes cgroups and its state directories: run it as root, or give its user a delegated"
    " cgroup (systemd Delegate=yes, --cgroup-root inside it) and writable --state-dir and"
    " --device-plugin-dir (docs/cgroups.md)"
)


def _os_error(exc: BaseException) -> OSError | None:
    """The OSError itself, or the one a CgroupError was raised from."""
    if isinstance(exc, OSError):
        return exc
    cause = exc.__cause__
    return cause if isinstance(cause, OSError) else None


def describe_start_error(exc: BaseException, listen: str) -> str | None:
    """The one-line message for an error while starting, or None if it is not an expected one."""
    os_error = _os_error(exc)
    if isinstance(exc, CgroupError):
        if os_error is not None and os_error.errno in (errno.EACCES, errno.EPERM):
            return f"{exc}: {ROOT_NEEDED}"
        return str(exc)
    if os_error is None:
        return None
    if os_error.filename:  # a file or directory the agent makes or reads
        if os_error.errno in (errno.EACCES, errno.EPERM):
            return f"{os_error.filename}: {os_error.strerror}: {ROOT_NEEDED}"
        return f"{os_error.filename}: {os_error.strerror}"
    return _listen_error(os_error, listen)  # no file: binding the status endpoint


def _listen_error(os_error: OSError, listen: str) -> str | None:
    if isinstance(os_error, socket.gaierror):
        return f"--listen {listen}: cannot resolve the host ({os_error.strerror})"
    if os_error.errno == errno.EADDRINUSE:
        return (
            f"--listen {listen}: address already in use (another kubenode agent?);"
            " choose a port with --listen"
        )
    if os_error.errno == errno.EADDRNOTAVAIL:
        return f"--listen {listen}: not an address of this machine"
    if os_error.errno in (errno.EACCES, errno.EPERM):
        return f"--listen {listen}: permission denied (ports below 1024 need root)"
    return None
