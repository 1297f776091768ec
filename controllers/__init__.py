"""kubenode's controller manager (kube-controller-manager's part that a one-machine cluster needs).

`kubenode controller-manager --kubeconfig ...` runs the controllers of this package against any API
server, through the shared client layer (kubenode/kubeclient) only:
- `nodelifecycle`: the node lifecycle controller's TaintNodesByCondition pass: a Node's conditions and
  spec.unschedulable become its NoSchedule taints (node.kubernetes.io/memory-pressure, disk-pressure,
  pid-pressure, network-unavailable, not-ready, unreachable, unschedulable). A kubelet may not change its
  own Node's taints (NodeRestriction), so this is where they come from.
- `manager`: leader election on the Lease kube-system/kube-controller-manager (the scheduler's shared
  Lease code), the controllers started once this process leads, stopped at once if it loses the Lease.
- `cli`: the command line.

Nothing here imports another engine (agent/, scheduler/, apiserver/, deviceplugin/).
"""
