"""Hollow nodes: the real agent with a runtime that only pretends, many to a process (kubemark's hollow-node).

A hollow node is `NodeAgent` + `ClusterMembership` exactly as `kubenode agent --kubeconfig` wires
them (registration, Lease, the pod informer, pod workers, the status manager, events, Node status),
with three stand-ins below the API path: `HollowLauncher` "starts" a container by recording it
(no process, no log file), `HollowCgroups` keeps pod cgroups as a set in memory (nothing under
/sys/fs/cgroup), and `FakeDevicePlugin` advertises a fixed set of devices for the Node status.
`HollowFleet` (fleet.py) runs N of them on one shared KubeClient (one connection pool, at most
`max_connections` unary requests on the wire at once; each pod watch holds its own connection);
each keeps the real agent's loops, as each kubelet keeps its own goroutines. `python -m agent.hollow`
runs a fleet until SIGTERM and keeps a ledger of every start and stop for the scale benchmark; its
`--driver` (driver.py) runs every loop of every node as a greenlet on one gevent event loop (one
OS thread a process: one timer heap for every node's Lease, node status and relist, one epoll set
for every node's pod watch), or as OS threads (`threads`, as `kubenode agent` runs them, with a
longer GIL switch interval). `sampler.py` profiles a threads fleet (--sample-stacks).
"""
