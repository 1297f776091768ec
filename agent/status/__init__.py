"""Pod status (the kubelet's pkg/kubelet/status): what the API server and `kubenode agent status` are told.

`podstatus` turns a pod record into a v1 PodStatus (phase, conditions, container states);
`statusmanager.StatusManager` writes it to the API server with events; `statustable` prints the local
status table. It receives pods from podworkers/podsync after each sync; it hands them nowhere.
"""
