"""The project's own processes started for real, shared by the tests and the benchmarks.

`apiserver.ApiServerProcess` runs `kubenode apiserver`, `agent.AgentProcess` runs `kubenode agent` (and the
static device plugin) as subprocesses. Not installed with the product; importable from the repository root.
Nothing here imports pytest, so a benchmark runs without the dev tools.
"""
