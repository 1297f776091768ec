"""kubenode agent."""
