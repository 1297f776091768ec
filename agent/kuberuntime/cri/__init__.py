"""The CRI runtime: pods with images, run by containerd (or any runtime.v1 CRI runtime) as the kubelet does.

`client` speaks the gRPC API; `runtime.CRIRuntime` is syncPod for CRI pods (sandbox, image pull, create,
start, restart, kill, relist, adoption) behind the interface the process runtime has (see
agent/kuberuntime/selector.py, which picks one per pod); `labels` holds the kubelet's labels and
annotations, `configs` builds the sandbox and container configs, `images` the pull policy and its backoff,
`streaming` the Exec, Attach and PortForward calls whose URLs agent/server/streamproxy.py proxies.
It receives pods from podworkers/podsync (through the selector) and reports through the pod record.
"""
