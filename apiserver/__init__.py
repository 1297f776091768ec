"""kubenode's embedded Kubernetes API server (`kubenode apiserver`).

It serves the REST API subset that kubectl, the agent and the scheduler use, stored in SQLite.
"""
