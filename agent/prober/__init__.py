"""The prober (the kubelet's pkg/kubelet/prober): liveness, readiness and startup probes of process pods.

`spec` reads a container's probes from the pod with kube's defaults; `handlers` runs one probe (exec through
kuberuntime/execsync.py, httpGet, tcpSocket, grpc); `worker` is one probe's state (thresholds, initial delay,
startup gating, reset on a new container); `manager.ProbeManager` schedules them all on one thread and a
fixed pool; `containers` turns the agent's pod record into what a worker looks at. podworkers/podsync hands
every synced pod to the manager and asks it which containers failed liveness or startup (it kills and
restarts them); status/ asks it for each container's started and ready.
"""
