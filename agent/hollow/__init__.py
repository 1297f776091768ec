"""Hollow nodes: the real agent with a runtime that only pretends, many to a process (kubemark's hollow-node).

A hollow node is `NodeAgent` + `ClusterMembership` exactly as `kubenode agent --kubeconfig` wires
them (registration, Lease, the pod informer, pod workers, the status manager, events, Node status),
with three stand-ins below the API path: `HollowLauncher` "starts" a container by recording it
(no process, no log file), `HollowCgroups` keeps pod cgroups as a set in memory (nothing under
/sys/fs/cgroup), and `FakeDevicePlugin` advertises a fixed set of devices for the Node status.
`HollowFleet` (fleet.py) runs N of them on one shared KubeClient (one connection pool, at most
`max_connections` unary requests on the wire at once; each pod watch holds its own connection);
each keeps its own threads, as each kubelet keeps its own goroutines. `python -m agent.hollow` runs
a fleet until SIGTERM (with a longer GIL switch interval: many threads, one GIL) and keeps a ledger
of every start and stop for the scale benchmark; `sampler.py` profiles a fleet (--sample-stacks).
"""
