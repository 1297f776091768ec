"""The pod manager (the kubelet's pkg/kubelet/pod): the pods this node knows, and what is kept of each.

`podmanager.PodManager` holds the desired pods from every source, admits new ones (lifecycle/) and hands
them to the pod workers (podworkers/); `podrecord` is each pod's durable record (containers, devices,
cgroup) that survives an agent restart; `mirrorpods` creates the API server's mirror pods of static
pods.
"""
