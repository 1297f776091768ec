"""The process runtime (the kubelet's pkg/kubelet/kuberuntime, for host processes).

`runtime.ProcessRuntime` is computePodActions + SyncPod for processes: it starts a pod's init and app
containers (`processes.spawn` puts each child in its container's cgroup below the pod's, with its device
rules and its own /dev, before exec: `isolation`), restarts them with the
crash-loop `backoff`, and kills them; `relist` (the PLEG's part) tells which have exited; `adoption`
takes over processes a previous agent left running. `envvars` builds a container's environment and argv.
It receives pods from podworkers/podsync and reports container states through the pod record
(container/podrecord.py) to status/.
"""
