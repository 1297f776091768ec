"""Dynamic Resource Allocation on the node: the plugin watcher, the drivers, the prepared claims.

watcher.py (registration sockets -> DriverRegistry) -> plugins.py (a client per driver, v1 or v1beta1) ->
manager.py (`DRAManager.prepare(pod)` before containers start, `unprepare(pod_uid)` after they are gone)
-> checkpoint.py (every claim a driver may have prepared, on disk before the driver is called).
errors.py is grpc-free (syncPod imports it on every agent); the rest loads grpc, so only an agent with a
plugins registry directory imports it.
"""
