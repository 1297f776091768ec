"""The CRI runtime: pods with images, run by containerd (or any runtime.v1 CRI runtime) as the kubelet does.

`client` speaks the gRPC API; `runtime.CRIRuntime` is syncPod for CRI pods (sandbox, image pull, create,
start, restart, kill) behind the interface the process runtime has (see agent/kuberuntime/selector.py, which
picks one per pod), on top of `relist.CRIRelist` (the connection, the PLEG's relist, adoption, the pods the
runtime holds); `gc` is the kubelet's container GC; `labels` holds the kubelet's labels and annotations,
`configs` builds the sandbox and container configs, `images` the pull policy and its backoff, `security` the
security context and the runAsNonRoot check against the image's user, `streaming` the Exec, Attach and
PortForward calls whose URLs agent/server/streamproxy.py proxies.
It receives pods from podworkers/podsync (through the selector) and reports through the pod record.
"""
