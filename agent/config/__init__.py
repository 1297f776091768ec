"""Pod sources (the kubelet's pkg/kubelet/config): where the pods this node should run come from.

`sources.ManifestSource` watches a directory of static pod manifests; `apisource.ApiPodSource` watches
the API server's pods bound to this node. Each produces snapshots of the desired pods, which the node
(agent/node.py) merges and hands to the pod manager and the pod workers (pod/, podworkers/).
"""
