"""ServiceAccount tokens for projected volumes (the kubelet's pkg/kubelet/token): see manager.py."""
