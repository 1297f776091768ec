"""The eviction manager (the kubelet's pkg/kubelet/eviction): the node's guard against its own pods.

`signals` observes memory, disk, inodes and pids as the kubelet computes them; `thresholds` parses the
kubelet's hard and soft thresholds; `manager.EvictionManager` turns met thresholds into node conditions
(reported by nodestatus/) and evicts pods in the kubelet's ranking; `podusage` measures each pod. It hands the
pods it evicts to the pod workers (podworkers/) as kills.
"""
