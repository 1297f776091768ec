"""The node's serving certificate (the kubelet's pkg/kubelet/certificate): asked of the API server with a
kubernetes.io/kubelet-serving CertificateSigningRequest when the agent joins, kept in <state-dir>/pki, and
handed to the authenticated daemon endpoint (agent/server/server.py)."""
