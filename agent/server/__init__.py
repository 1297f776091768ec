"""The agent's HTTP endpoint (the kubelet's pkg/kubelet/server and pkg/kubelet/metrics).

`httpapi.StatusServer` serves /healthz, /pods, /metrics and the streams (`containerlogs`: /containerLogs
for `kubectl logs` through the API server; exec, attach and port-forward on the authenticated endpoint,
`streamproxy` for CRI pods); `metrics.AgentMetrics` holds the kubelet-named Prometheus
metrics. It reads what the other packages report; it hands pods nowhere.
"""
