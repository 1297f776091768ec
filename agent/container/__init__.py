"""The agent's ground floor (the kubelet's pkg/kubelet/container): runtime-neutral types every manager shares.

The pod record and its store (`podrecord`, written through `groupcommit`), the runtime interface with what a
kill needs (`runtime`), the streaming flags (`streaming`), a command's result in a container's place
(`execresult`), a mounted volume (`volumes`), a reading of a pod's usage (`usage`), the downward API's
fields (`downwardapi`), the node's security settings (`security`) and the resources a container runs with
(`resources`). Nothing here imports a manager: tests/agent/test_layers.py holds the floors.
"""
