"""The node toward the API server (the kubelet's nodestatus and nodelease, and its registration).

`cluster.ClusterMembership` joins a cluster: it registers the Node, starts the pod source from the API,
the `reporter.NodeStatusReporter` (capacity, allocatable, conditions, addresses, devices) and the
`nodelease` renewer, and `mirrorpods.MirrorPods` (the API server's mirror pods of static pods). It hands
no pods anywhere: pods reach the node through config/apisource.
"""
