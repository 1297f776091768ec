"""Pod admission (the kubelet's pkg/kubelet/lifecycle): whether a pod may run on this node at all.

`admission.admit` checks a pod's requests against what the node can allocate, as the kubelet's predicate
admit handler does, and names the reason when it cannot (OutOfcpu, OutOfpods, ...). The pod manager
(pod/) calls it before a pod reaches the pod workers.
"""
