"""kubenode's embedded Kubernetes API server (`kubenode apiserver`): the REST API subset that kubectl, the agent and the scheduler use, stored in SQLite."""
