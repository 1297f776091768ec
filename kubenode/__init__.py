"""kubenode: exact CPU and GPU allocation for Kubernetes nodes and bare-metal machines."""

__version__ = "0.1.0"
