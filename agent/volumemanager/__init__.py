"""The volume manager: the kubelet's pkg/kubelet/volumemanager, with the pkg/volume plugins process pods use.

syncPod (agent/podworkers/podsync.py) calls `VolumeManager.mount_pod` before the pod cgroup and the
processes: every volume ready on the host under `<state>/pods/<uid>/volumes/<plugin>/<name>` or a
`VolumeSetupError` (a FailedMount event per volume, the containers not started, a retry with backoff).
The ready volumes go to the process runtime (agent/kuberuntime/), which gives each container its own
mount namespace with its volumeMounts bound in (`namespace.py`). SyncTerminatedPod and the orphan
cleanup call `unmount_pod`.

Modules: `manager.py` (set up, tear down, orphans), `projection.py` (the files of configMap, secret,
downwardAPI and projected volumes), `atomicwriter.py` (the kubelet's atomic writer), `hostpath.py`
(hostPath's type checks), `namespace.py` (a container's mount namespace), `mountutil.py` (mount(2),
umount2(2), unshare(2), the mount table).
"""
