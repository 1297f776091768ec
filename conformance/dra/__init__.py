"""`kubenode conformance --dra-driver-cmd CMD`: play the kubelet against any DRA driver (suite.py)."""
