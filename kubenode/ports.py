"""Default ports of kubenode's daemons: one constant each, used by the code, the docs and the manifests.

The agent's status endpoint shares the node's network namespace with Kubernetes (the DaemonSet runs with
hostNetwork), so its default must be one no Kubernetes component listens on by default. Taken there:
6443 (API server), 2379-2380 (etcd), 10248 (kubelet healthz), 10249 (kube-proxy metrics), 10250
(kubelet), 10255 (kubelet read-only), 10256 (kube-proxy health), 10257 (controller manager), 10258
(cloud controller manager), 10259 (scheduler), 30000-32767 (NodePorts). 10366 is none of them.
tests/test_ports.py checks that the manifests and docs name this value.
"""

AGENT_STATUS_PORT = 10366
# The device plugin's --metrics-bind-address in deploy/deviceplugin-daemonset.yaml (the pod's own network).
DEVICEPLUGIN_METRICS_PORT = 10367
# The live scheduler's --metrics-bind-address in deploy/scheduler.yaml (the pod's own network).
SCHEDULER_METRICS_PORT = 10368
