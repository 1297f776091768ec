"""The one Kubernetes client layer of kubenode (the agent and the scheduler both use it).

It speaks only the public API, so it works the same against `kubenode apiserver` and a real
kube-apiserver. Objects are plain dicts (raw JSON via orjson); decode them into
`kubenode.model` (or anything else) yourself.

    from kubenode.kubeclient import KubeClient, PODS, load

    client = KubeClient(load("/etc/kubenode/kubeconfig"))   # None: in-cluster service account
    pod = client.get(PODS, "web", "default")                 # dict; NotFound, Conflict, ... on errors
    client.patch(PODS, "web", {"metadata": {"uid": uid}, "status": {...}}, "default", subresource="status")
    client.delete(PODS, "web", "default", grace_period_seconds=0, uid=uid)

Modules:
- `config`: `load(path)`, `load_kubeconfig(path, context)`, `load_incluster()` -> `ClientConfig`, filled by
  the official `kubernetes.config` loaders (token, tokenFile, client certs, CA, exec plugins, rotating
  service-account tokens).
- `client`: `KubeClient` with get / list / list_all / create / update / patch (strategic, merge, json) /
  delete (grace, uid and resourceVersion preconditions) / watch, with the config's TLS and auth;
  `Resource` and the constants `PODS`, `NODES`, `NAMESPACES`, `EVENTS`, `LEASES`,
  the DRA kinds (`RESOURCE_SLICES`, `DEVICE_CLASSES`, `RESOURCE_CLAIMS`),
  `NODE_RESOURCE_TOPOLOGIES`.
- `transport`: the unary verbs' HTTP/1.1 over kept-alive connections; a watch streams on a connection of its
  own from it, read with `http.client` (no HTTP library beyond the standard one is imported).
- `reactor`: `KubeClient.request_async(method, path, done, ...)`: the same requests, many in flight from
  one thread on non-blocking connections (the scheduler's bindings and events); `done` runs on that thread.
- `errors`: `KubeError` > `TransportError` (no answer) and `ApiError(code, reason, message, status)` >
  `NotFound`, `Conflict` > `AlreadyExists`, `Gone`, `Forbidden`, `Unauthorized`, `Invalid`; `is_retryable`.
- `informer`: `Informer` (list with limit/continue, watch from the list's resourceVersion with bookmarks
  and timeoutSeconds, resume on a dropped connection, relist on 410, capped exponential backoff with
  jitter; `on_add`/`on_update`/`on_delete`, `has_synced`, a `decode` function, injectable clock).
- `events`: `EventRecorder` (client-go's count/lastTimestamp aggregation, never blocks the caller;
  writer threads, or `asynchronous=True`: sent with `request_async`, no thread),
  `ObjectReference`, `reference_to(obj)`.
- `lease`: `renew_lease` (create, or PUT with resourceVersion: of a GET, or of the Lease last stored),
  `lease_body`, `get_lease`, `LeaseRenewer` (a renewing thread; no GET while its PUTs succeed).
- `timefmt`: `rfc3339` (metav1.Time), `micro_time` (MicroTime, exactly 6 fractional digits), `parse_time`.
- `leaderelection`: leader election on a Lease (the scheduler's).

Nothing here imports an engine (agent/, scheduler/, apiserver/, deviceplugin/).
"""

from kubenode.kubeclient.client import (
    DEVICE_CLASSES,
    EVENTS,
    LEASES,
    NAMESPACES,
    NODE_RESOURCE_TOPOLOGIES,
    NODES,
    PODS,
    RESOURCE_CLAIMS,
    RESOURCE_SLICES,
    KubeClient,
    Resource,
)
from kubenode.kubeclient.config import ClientConfig, load, load_incluster, load_kubeconfig
from kubenode.kubeclient.errors import (
    AlreadyExists,
    ApiError,
    Conflict,
    Forbidden,
    Gone,
    Invalid,
    KubeConfigError,
    KubeError,
    NotFound,
    TransportError,
    Unauthorized,
    is_retryable,
)

__all__ = [
    "DEVICE_CLASSES",
    "EVENTS",
    "LEASES",
    "NAMESPACES",
    "NODES",
    "NODE_RESOURCE_TOPOLOGIES",
    "PODS",
    "RESOURCE_CLAIMS",
    "RESOURCE_SLICES",
    "AlreadyExists",
    "ApiError",
    "ClientConfig",
    "Conflict",
    "Forbidden",
    "Gone",
    "Invalid",
    "KubeClient",
    "KubeConfigError",
    "KubeError",
    "NotFound",
    "Resource",
    "TransportError",
    "Unauthorized",
    "is_retryable",
    "load",
    "load_incluster",
    "load_kubeconfig",
]
