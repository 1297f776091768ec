"""This machine's address as other machines see it: what a Node reports as InternalIP.

Shared by the agent (its Node's status.addresses) and `kubenode up` (the address the local agent listens
on, so that the API server and `kubenode trace` find it where the Node says it is).
"""

from __future__ import annotations

import socket


def host_ip() -> str:
    """The address other machines reach this one at: the source address of the default route."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        try:
            s.connect(("10.255.255.255", 1))  # no packet is sent; this only picks a route
            return str(s.getsockname()[0])
        except OSError:
            return "127.0.0.1"
