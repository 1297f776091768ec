"""Dynamic Resource Allocation (resource.k8s.io/v1), shared and pure: typed objects and the CEL environment.

No engine imports: the scheduler's allocator, the API server's validation and the node side all
read the same types (`kubenode.dra.types`) and compile selectors the same way (`kubenode.dra.cel`).
"""
