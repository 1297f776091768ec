"""The agent's configuration types (the kubelet's pkg/kubelet/apis/config).

`config.AgentConfig` is the KubeletConfiguration of this agent: defaults, the YAML file and flags on
top; `clusterflags` parses the cluster-facing values (node labels, taints, reserved resources). Every
other package reads an AgentConfig; none hands pods anywhere.
"""
