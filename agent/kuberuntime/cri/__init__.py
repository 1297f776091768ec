"""The CRI runtime: pods with images, run by a container runtime (containerd) over the kubelet's CRI (runtime.v1).

`client` speaks the gRPC API; `runtime.CRIRuntime` is syncPod for CRI pods (sandbox, image pull, create, start,
restart, kill) behind the same interface as the process runtime (agent/kuberuntime/runtime.py); `labels` holds
the kubelet's labels and annotations, `sandbox`/`containers` build the configs, `images` the pull policy and
its backoff, and `pleg` the relist that turns the runtime's containers into container states. It receives
pods from podworkers/podsync (through agent/kuberuntime/selector.py) and reports through the pod record.
"""
