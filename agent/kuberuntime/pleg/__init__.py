"""The pod lifecycle event generator: how the agent learns that a container stopped, as the kubelet's PLEG.

generic.py: the process table and the relist (every `relist_interval`, the kubelet's generic PLEG);
evented.py: the Evented PLEG (KEP-3386), for a runtime that streams its container events: the relist then runs
every 300 s as a safety net, and again at its own period if the stream keeps failing. Either hands a pod whose
container stopped to the pod workers (the node's loop, agent/node.py) for a sync.
"""

from agent.kuberuntime.pleg.evented import (
    CONTAINER_STARTED,
    CONTAINER_STOPPED,
    EVENTED_RELIST_PERIOD_S,
    ContainerEvent,
    ContainerEventHub,
    ContainerEventStream,
    EventedPLEG,
    EventStreamError,
)
from agent.kuberuntime.pleg.generic import ProcessTable, mark_exited, relist_containers

__all__ = [
    "CONTAINER_STARTED",
    "CONTAINER_STOPPED",
    "EVENTED_RELIST_PERIOD_S",
    "ContainerEvent",
    "ContainerEventHub",
    "ContainerEventStream",
    "EventStreamError",
    "EventedPLEG",
    "ProcessTable",
    "mark_exited",
    "relist_containers",
]
