"""The real Kubernetes components (v1.37, built by `make k8s` from interop/'s Go modules) run on loopback
beside kubenode for the interop tests and the peer benchmarks. Test harness only: the product never imports
this package."""
