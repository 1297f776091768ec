"""The kubelet's `--container-runtime-endpoint` form, read once for every part that takes it.

The agent's CRI client dials the socket it names; its settings loader and `kubenode up` check the flag
with the same rule before anything starts, so a bad endpoint is one line naming it, not a dial timeout.
"""

from __future__ import annotations


def socket_path(endpoint: str) -> str:
    """The socket path of a `unix://` endpoint (the only kind a node runtime uses); ValueError otherwise."""
    if endpoint.startswith("unix://"):
        path = endpoint.removeprefix("unix://")
    elif endpoint.startswith("/"):
        path = endpoint
    else:
        raise ValueError(f"container runtime endpoint {endpoint!r}: must be unix:///<absolute socket path>")
    if not path.startswith("/"):
        raise ValueError(f"container runtime endpoint {endpoint!r}: the socket path must be absolute")
    return path
