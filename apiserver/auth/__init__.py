"""Authentication, authorization and admission for `kubenode apiserver`, the way kube-apiserver layers them.

Flow of a request: `authn.TokenAuthenticator` turns the `Authorization: Bearer` header into a
`UserInfo` (or None: 401); `authz.new_authorizer("Node,RBAC")` decides on that user and the parsed
RequestInfo (403 with kube's text); for writes by a node user, `noderestriction.admit` then looks at the
old and new object (403 again). At first start the daemon calls
`tokens.ensure_token_file`, `pki.ensure_serving_cert` and `kubeconfig.write_kubeconfig`.
"""

from __future__ import annotations

from dataclasses import dataclass

# Groups kube-apiserver's authenticators add; every authenticated user is in system:authenticated.
MASTERS_GROUP = "system:masters"
NODES_GROUP = "system:nodes"
AUTHENTICATED_GROUP = "system:authenticated"
NODE_USER_PREFIX = "system:node:"
SCHEDULER_USER = "system:kube-scheduler"
CONTROLLER_MANAGER_USER = "system:kube-controller-manager"
ADMIN_USER = "admin"


@dataclass(frozen=True)
class UserInfo:
    name: str
    uid: str
    groups: tuple[str, ...]
    extra: tuple[tuple[str, tuple[str, ...]], ...] = ()  # impersonated extras (auth/impersonation.py)


def node_name_of(user: UserInfo) -> str | None:
    """The node a user speaks for (`system:node:<name>` in group system:nodes), as kube's NodeIdentifier."""
    if NODES_GROUP not in user.groups or not user.name.startswith(NODE_USER_PREFIX):
        return None
    return user.name[len(NODE_USER_PREFIX) :] or None
