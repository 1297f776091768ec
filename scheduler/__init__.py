"""kubenode scheduler."""
