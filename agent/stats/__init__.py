"""Resource usage of pods and containers (the kubelet's pkg/kubelet/stats), read for the Summary API.

`usage` holds what a reading is (`Usage`, `PodUsage`) and the process runtime's way: the pod cgroup, split
between a pod's containers by their processes' sessions. `cri` is the CRI runtime's way: containerd's
ListPodSandboxStats (pod and containers in one call), or ListContainerStats with the pod cgroup where the
runtime cannot give the sandbox's. Each runtime answers `pod_usage` (agent/container/runtime.py) with
one of them; agent/server/stats.py turns the readings into /stats/summary and /metrics/resource.
"""
