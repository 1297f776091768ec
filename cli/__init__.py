"""The composition root: the `kubenode` command (cli/main.py, which lists every part's subcommands) and the
commands that put the engines together (`kubenode up`, `kubenode trace`).

Nothing imports this package back: the engines (agent/, scheduler/, apiserver/, deviceplugin/) and the
shared ground (kubenode/) stay unaware of it. Its commands talk to the engines the way a user would: as
processes they start, through the Kubernetes API, the agent's status endpoint and the cgroup files.
"""
