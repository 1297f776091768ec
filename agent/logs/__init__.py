"""Container logs (the kubelet's pkg/kubelet/logs): rotation of each container's log while it runs, and
reading across the rotations.

`manager.ContainerLogManager` checks every container's live log each `containerLogMonitorInterval` and
rotates those over `containerLogMaxSize`, keeping `containerLogMaxFiles`: a process container's in place
(`rotation`), a CRI container's by rename and the runtime's ReopenContainerLog (`renaming`); `reader` reads a
restart's output whole, from the end or following it, for `kubectl logs` (server/containerlogs.py). It
takes no pods: it reads the log paths the runtime (kuberuntime/) recorded in the pod records.
"""
