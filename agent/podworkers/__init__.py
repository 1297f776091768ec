"""The pod workers and syncPod (the kubelet's pod_workers.go and kubelet.go's sync functions).

`workers.PodWorkers` runs one serialized worker per pod (`types` holds the update and work types) and
calls `podsync.PodSyncer`'s SyncPod, SyncTerminatingPod and SyncTerminatedPod. SyncPod takes a pod from
the pod manager, makes its cgroup and devices (cm/) and hands its containers to the runtime
(kuberuntime/).
"""
