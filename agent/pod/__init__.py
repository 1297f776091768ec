"""The pod manager (the kubelet's pkg/kubelet/pod): the pods this node knows, and what is kept of each.

`podtable.PodTable` holds the desired pods from every source and each pod's record (the record itself is
agent/container/podrecord.py); `podmanager.PodManager` admits new pods (lifecycle/) and hands them to the
pod workers (podworkers/); `podviews.PodViews` shows them to the status endpoint, status manager and mirror
pods; `evictiontarget.NodeEvictionTarget` is the node as the eviction manager sees it.
"""
