"""`kubenode conformance`: plays the kubelet against a device plugin and reports what passes."""
