"""The container manager (the kubelet's pkg/kubelet/cm): what a pod is given on this node.

`cgroups/` makes the QoS tiers and the pod cgroups (v1 and v2, cgroupfs and systemd drivers);
`devicemanager/` is the kubelet's side of the Device Plugin API (registration, ListAndWatch, Allocate,
the checkpoint, PodResources); `topologymanager/` merges the device manager's NUMA hints under the
node's policy at admission and gives each container the affinity its devices are chosen with;
`cpupool` keeps the shared CPU pool that pods without exclusive CPUs run on. podworkers/podsync asks
them for a pod's cgroup and devices before it hands the pod's containers to kuberuntime/.
"""
