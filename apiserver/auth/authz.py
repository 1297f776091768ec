"""Authorization: kube's `--authorization-mode=Node,RBAC` reduced to the bootstrap policy this server needs.

A request is allowed when any authorizer in the chain allows it (kube's union authorizer):
- `system:masters` may do everything (kube's privileged-group short cut).
- RBAC with the bootstrap ClusterRoleBindings: system:kube-scheduler -> the `system:kube-scheduler` rules,
  system:kube-controller-manager -> its rules and the node controller's,
  every authenticated user -> `system:discovery`/`system:basic-user`/`system:public-info-viewer` (the
  non-resource URLs: discovery, /version, /openapi, health); service accounts -> the OIDC documents.
- RBAC from the stored rbac.authorization.k8s.io/v1 objects (rbacstore.py: bindings indexed by subject),
  and from `--authorization-policy-file` (policyfile.py), read again whenever it changes.
- Node: a user `system:node:<n>` in group `system:nodes` gets the Node authorizer's static rules (kube's
  `NodeRules()`), leases only for `kube-node-lease/<n>`, and get/list/watch of the ConfigMaps and Secrets
  that pods bound to it refer to (the graph of nodegraph.py; anything else: "no relationship found").
  Which objects it may write (its own Node, pods bound to it, mirror pods) is admission's job: see
  noderestriction.py.
Denied requests get kube's forbidden message, e.g. `pods "x" is forbidden: User "u" cannot update resource
"pods" in API group "" in the namespace "default"`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from apiserver.auth import CONTROLLER_MANAGER_USER, MASTERS_GROUP, SCHEDULER_USER, UserInfo, node_name_of
from apiserver.auth.nodegraph import NodeGraph
from apiserver.auth.policyfile import Policy, PolicyError, ReloadingPolicy
from apiserver.auth.rbacstore import StoredPolicy
from apiserver.request import RequestInfo

NODE_LEASE_NAMESPACE = "kube-node-lease"


@dataclass(frozen=True)
class Decision:
    allowed: bool
    message: str  # kube's 403 text when denied


ALLOW = Decision(True, "")


class Authorizer(Protocol):
    def authorize(self, user: UserInfo, info: RequestInfo) -> Decision: ...


@dataclass(frozen=True)
class Rule:
    """One RBAC PolicyRule: resources are `plural` or `plural/sub`; "*" matches anything."""

    verbs: frozenset[str]
    groups: frozenset[str] = frozenset()
    resources: frozenset[str] = frozenset()
    urls: tuple[str, ...] = ()  # non-resource URLs; a trailing "*" is a prefix
    names: frozenset[str] = frozenset()  # resourceNames: only requests naming one of them (never create)

    def matches(self, info: RequestInfo) -> bool:
        if not ("*" in self.verbs or info.verb in self.verbs):
            return False
        if not info.is_resource_request:
            return any(
                info.path == u or (u.endswith("*") and info.path.startswith(u[:-1])) for u in self.urls
            )
        if self.names and info.name not in self.names:
            return False
        resource = f"{info.resource}/{info.subresource}" if info.subresource else info.resource
        return ("*" in self.groups or info.api_group in self.groups) and (
            "*" in self.resources or resource in self.resources
        )


def rule(
    verbs: str,
    groups: Sequence[str] = ("",),
    resources: Sequence[str] = (),
    urls: Sequence[str] = (),
    names: Sequence[str] = (),
) -> Rule:
    return Rule(
        frozenset(verbs.split()), frozenset(groups), frozenset(resources), tuple(urls), frozenset(names)
    )


# kube's bootstrap roles for everyone authenticated: system:public-info-viewer (the health and version paths,
# also open to system:unauthenticated in kube), system:discovery and system:basic-user.
PUBLIC_INFO_RULES = (
    rule(
        "get",
        urls=(
            "/healthz",
            "/healthz/*",
            "/livez",
            "/livez/*",
            "/readyz",
            "/readyz/*",
            "/version",
            "/version/",
        ),
    ),
)
DISCOVERY_ONLY_RULES = (rule("get", urls=("/api", "/api/*", "/apis", "/apis/*", "/openapi", "/openapi/*")),)
# system:basic-user: ask what you may do, and who you are
BASIC_USER_RULES = (
    rule("create", groups=("authorization.k8s.io",), resources=("selfsubjectaccessreviews",)),
    rule("create", groups=("authorization.k8s.io",), resources=("selfsubjectrulesreviews",)),
    rule("create", groups=("authentication.k8s.io",), resources=("selfsubjectreviews",)),
)
DISCOVERY_RULES = PUBLIC_INFO_RULES + DISCOVERY_ONLY_RULES + BASIC_USER_RULES

# system:service-account-issuer-discovery, bound to the group system:serviceaccounts: the OIDC documents.
ISSUER_DISCOVERY_RULES = (rule("get", urls=("/.well-known/openid-configuration", "/openid/v1/jwks")),)
SERVICEACCOUNTS_GROUP = "system:serviceaccounts"

# system:monitoring (bound to the group of the same name): the metrics and health endpoints.
MONITORING_GROUP = "system:monitoring"
MONITORING_RULES = (rule("get", urls=("/metrics", "/metrics/*", "/livez", "/readyz", "/healthz")),)

DRA_GROUP = "resource.k8s.io"
DRA_RESOURCES = ("deviceclasses", "resourceclaims", "resourceclaimtemplates", "resourceslices")

READ = "get list watch"
READ_UPDATE = "get list watch update patch"

# bootstrappolicy's system:kube-scheduler as v1.37.2 has it with its default feature gates
# (plugin/pkg/auth/authorizer/rbac/bootstrappolicy/policy.go: DynamicResourceAllocation, DRADeviceTaintRules
# and DRAExtendedResource on), whether or not this server serves the kind: the real kube-scheduler informs on
# every one of them, and a 403 there would keep its caches from syncing.
SCHEDULER_RULES = (
    rule("create patch update", groups=("", "events.k8s.io"), resources=("events",)),
    rule("create", groups=("coordination.k8s.io",), resources=("leases",)),
    # kube's role names only kube-scheduler's Lease; a second scheduler running as system:kube-scheduler gets
    # its own Lease name added there (kube's "Configure Multiple Schedulers"): kubenode's, as `kubenode up`
    # runs it.
    rule("get update list watch", groups=("coordination.k8s.io",), resources=("leases",),
         names=("kube-scheduler", "kubenode-scheduler")),
    rule("get list watch create update patch delete deletecollection", groups=("coordination.k8s.io",),
         resources=("leasecandidates",)),
    rule(READ, resources=("nodes",)),
    rule("get list watch delete", resources=("pods",)),
    rule("create", resources=("pods/binding", "bindings")),
    rule("patch update", resources=("pods/status",)),
    rule(READ, resources=("services", "replicationcontrollers")),
    rule(READ, groups=("apps", "extensions"), resources=("replicasets",)),
    rule(READ, groups=("apps",), resources=("statefulsets",)),
    rule(READ, groups=("policy",), resources=("poddisruptionbudgets",)),
    rule(READ, resources=("persistentvolumeclaims", "persistentvolumes")),
    rule("create", groups=("authentication.k8s.io",), resources=("tokenreviews",)),
    rule("create", groups=("authorization.k8s.io",), resources=("subjectaccessreviews",)),
    rule(READ, groups=("storage.k8s.io",), resources=("csinodes",)),
    rule("get list watch", groups=("storage.k8s.io",), resources=("volumeattachments",)),
    rule(READ, resources=("namespaces",)),
    rule(READ, groups=("storage.k8s.io",), resources=("csidrivers",)),
    rule(READ, groups=("storage.k8s.io",), resources=("csistoragecapacities",)),
    # Dynamic Resource Allocation
    rule(READ, groups=(DRA_GROUP,), resources=("deviceclasses",)),
    rule(READ_UPDATE, groups=(DRA_GROUP,), resources=("resourceclaims",)),
    rule(READ_UPDATE, groups=(DRA_GROUP,), resources=("resourceclaims/status",)),
    rule("update", resources=("pods/finalizers",)),
    rule(READ, groups=(DRA_GROUP,), resources=("resourceslices",)),
    rule("create delete", groups=(DRA_GROUP,), resources=("resourceclaims",)),
    rule(READ, groups=(DRA_GROUP,), resources=("devicetaintrules",)),
    # kubenode's own scheduler: the NUMA-aware filter reads what the nodes publish (scheduler-plugins' RBAC
    # grants this), and it reads the claim templates.
    rule("get list watch", groups=("topology.node.k8s.io",), resources=("noderesourcetopologies",)),
    rule(READ, groups=(DRA_GROUP,), resources=("resourceclaimtemplates",)),
)  # fmt: skip

# bootstrappolicy's system:volume-scheduler, bound to the user system:kube-scheduler too.
VOLUME_SCHEDULER_RULES = (
    rule(READ_UPDATE, resources=("persistentvolumes",)),
    rule(READ, groups=("storage.k8s.io",), resources=("storageclasses",)),
    rule(READ_UPDATE, resources=("persistentvolumeclaims",)),
)

SCHEDULER_ALL_RULES = SCHEDULER_RULES + VOLUME_SCHEDULER_RULES

# bootstrappolicy's system:kube-controller-manager (events, its Lease, reading everything served here) with
# the rules of the one controller it runs, system:controller:node-controller, as kube grants them when the
# controller manager runs without per-controller service-account credentials.
CONTROLLER_MANAGER_RULES = (
    rule("create patch update", groups=("", "events.k8s.io"), resources=("events",)),
    rule("create", groups=("coordination.k8s.io",), resources=("leases",)),
    rule("get update", groups=("coordination.k8s.io",), resources=("leases",)),
    # kube's own rules of the role besides (v1.37.2 bootstrappolicy): every shared informer lists and watches
    # everything, the tokens controller writes secrets and service accounts, the clients of the per-controller
    # credentials ask for tokens, delegated authn/authz
    rule("list watch", groups=("*",), resources=("*",)),
    rule("create update", resources=("secrets", "serviceaccounts")),
    rule("delete", resources=("secrets",)),
    rule("get", resources=("namespaces", "secrets", "serviceaccounts", "configmaps")),
    rule("create", resources=("serviceaccounts/token",)),
    rule("create", groups=("authentication.k8s.io",), resources=("tokenreviews",)),
    rule("create", groups=("authorization.k8s.io",), resources=("subjectaccessreviews",)),
    rule("get list watch", resources=("nodes", "pods", "namespaces")),
    rule("update patch delete", resources=("nodes",)),
    rule("patch update", resources=("nodes/status", "pods/status")),
    rule("delete", resources=("pods",)),
    # The workload controllers' roles (system:controller:replicaset-controller, deployment-controller,
    # daemon-set-controller, job-controller, serviceaccount-controller, generic-garbage-collector).
    rule("create patch update", resources=("pods", "serviceaccounts")),
    rule("get list watch", resources=("serviceaccounts",)),
    # system:controller:root-ca-cert-publisher: kube-root-ca.crt in every namespace
    rule("get list watch create update", resources=("configmaps",)),
    rule(
        "get list watch create update patch delete",
        groups=("apps", "batch"),
        resources=("deployments", "replicasets", "daemonsets", "jobs"),
    ),
    # system:controller:daemon-set-controller: the DaemonSet's revision history
    rule("get list watch create update patch delete", groups=("apps",), resources=("controllerrevisions",)),
    # system:controller:statefulset-controller and cronjob-controller
    rule("get list watch create update patch delete", groups=("apps",), resources=("statefulsets",)),
    rule("update patch", groups=("apps",), resources=("statefulsets/status",)),
    rule("get list watch create update patch delete", groups=("batch",), resources=("cronjobs",)),
    rule("update patch", groups=("batch",), resources=("cronjobs/status",)),
    rule("get list watch create update patch", resources=("persistentvolumeclaims",)),
    rule(
        "update patch",
        groups=("apps", "batch"),
        resources=("deployments/status", "replicasets/status", "daemonsets/status", "jobs/status"),
    ),
    # system:controller:resource-claim-controller: claims from templates, consumers that are gone, the
    # delete-protection finalizer removed (update); the garbage collector patches claims' owners.
    rule("get list watch", groups=(DRA_GROUP,), resources=("resourceclaims", "resourceclaimtemplates")),
    rule("create update patch delete", groups=(DRA_GROUP,), resources=("resourceclaims",)),
    rule("update patch", groups=(DRA_GROUP,), resources=("resourceclaims/status",)),
)

# The Node authorizer's NodeRules() for the kinds served here (nodes, pods, events, leases).
NODE_RULES = (
    rule("create get list watch", resources=("nodes",)),
    rule("update patch", resources=("nodes/status",)),
    rule("update patch delete", resources=("nodes",)),
    rule("create update patch", groups=("", "events.k8s.io"), resources=("events",)),
    rule("get list watch", resources=("pods",)),
    rule("create delete", resources=("pods",)),  # mirror pods only: admission checks
    rule("update patch", resources=("pods/status",)),
    rule("create", resources=("pods/eviction",)),
    rule("get list watch", resources=("namespaces",)),
    rule("get list watch", groups=("node.k8s.io",), resources=("runtimeclasses",)),
    rule("get list watch", resources=("services",)),
    # kube's system:node role: a node asks for its serving certificate and has its callers authorized.
    rule("create get list watch", groups=("certificates.k8s.io",), resources=("certificatesigningrequests",)),
    rule("create", groups=("authorization.k8s.io",), resources=("subjectaccessreviews",)),
    # tokens for the pods bound to it: NodeRestriction (noderestriction.token_refusal) checks the pod
    rule("create", resources=("serviceaccounts/token",)),
    # DRA: a node publishes its ResourceSlices (NodeRestriction admission holds each one written or deleted,
    # deletecollection's too, to its own nodeName) and reads any; its pods' claims are read along the graph.
    rule(
        "get list watch create update patch delete deletecollection",
        groups=(DRA_GROUP,),
        resources=("resourceslices",),
    ),
)
GRAPH_RESOURCES = (
    "secrets",
    "configmaps",
)  # read only along the graph (kube's authorizeReadNamespacedObject)
NODE_LEASE_VERBS = frozenset({"get", "create", "update", "patch", "delete"})


def forbidden_message(user: UserInfo, info: RequestInfo, reason: str = "") -> str:
    """kube's responsewriters.forbiddenMessage plus the authorizer's reason."""
    if not info.is_resource_request:
        text = f'forbidden: User "{user.name}" cannot {info.verb} path "{info.path}"'
    else:
        resource = f"{info.resource}/{info.subresource}" if info.subresource else info.resource
        scope = f'in the namespace "{info.namespace}"' if info.namespace else "at the cluster scope"
        qualified = f"{info.resource}.{info.api_group}" if info.api_group else info.resource
        subject = f'{qualified} "{info.name}"' if info.name else qualified
        text = (
            f'{subject} is forbidden: User "{user.name}" cannot {info.verb} resource "{resource}"'
            f' in API group "{info.api_group}" {scope}'
        )
    return f"{text}: {reason}" if reason else text


class AlwaysAllow:
    def authorize(self, user: UserInfo, info: RequestInfo) -> Decision:
        return ALLOW


class NodeRBACAuthorizer:
    """`Node,RBAC`: the union of the Node authorizer and RBAC with kube's bootstrap bindings (and the
    policy file's, if one was given)."""

    def __init__(self, policy: Policy | None = None) -> None:
        self.policy = policy
        self.graph: NodeGraph | None = None  # set once the store is loaded (daemon.py); None: deny reads
        self.stored: StoredPolicy | None = None  # the stored Roles and bindings, set with the graph

    def authorize(self, user: UserInfo, info: RequestInfo) -> Decision:
        if MASTERS_GROUP in user.groups:
            return ALLOW
        if any(r.matches(info) for r in DISCOVERY_RULES):
            return ALLOW
        if MONITORING_GROUP in user.groups and any(r.matches(info) for r in MONITORING_RULES):
            return ALLOW
        if SERVICEACCOUNTS_GROUP in user.groups and any(r.matches(info) for r in ISSUER_DISCOVERY_RULES):
            return ALLOW
        if user.name == SCHEDULER_USER and any(r.matches(info) for r in SCHEDULER_ALL_RULES):
            return ALLOW
        if user.name == CONTROLLER_MANAGER_USER and any(r.matches(info) for r in CONTROLLER_MANAGER_RULES):
            return ALLOW
        if self.stored is not None and self.stored.decide(user, info) is not None:
            return ALLOW
        if self.policy is not None and self.policy.decide(user, info) is not None:
            return ALLOW
        node = node_name_of(user)
        if node is not None:
            decision = self._node(node, user, info)
            if decision is not None:
                return decision
        if self.policy is not None:
            self.policy.denied(user, info)
        return Decision(False, forbidden_message(user, info))

    def _node(self, node: str, user: UserInfo, info: RequestInfo) -> Decision | None:
        if info.is_resource_request and info.resource == "noderesourcetopologies":
            # kubenode: a node publishes its own NodeResourceTopology (named as the node) and reads any.
            if info.verb in ("get", "list", "watch") or info.name in ("", node):
                return ALLOW if info.api_group == "topology.node.k8s.io" else None
            return Decision(
                False,
                forbidden_message(user, info, "can only access the NodeResourceTopology of its own node"),
            )
        if info.is_resource_request and info.api_group == "coordination.k8s.io" and info.resource == "leases":
            # kube's authorizeLease: only the node's own Lease in kube-node-lease (create: name in body).
            if info.verb not in NODE_LEASE_VERBS or info.subresource:
                return None
            if info.namespace != NODE_LEASE_NAMESPACE:
                return Decision(
                    False,
                    forbidden_message(user, info, "can only access leases in the kube-node-lease namespace"),
                )
            if info.name and info.name != node:
                return Decision(
                    False,
                    forbidden_message(
                        user, info, "can only access node lease with the same name as the requesting node"
                    ),
                )
            return ALLOW
        along_graph = (info.api_group == "" and info.resource in GRAPH_RESOURCES) or (
            info.api_group == DRA_GROUP and info.resource == "resourceclaims"  # the claims of its pods
        )
        if info.is_resource_request and along_graph:
            return (
                Decision(False, forbidden_message(user, info, why))
                if (why := self._graph(node, info))
                else ALLOW
            )
        return ALLOW if any(r.matches(info) for r in NODE_RULES) else None

    def _graph(self, node: str, info: RequestInfo) -> str:
        """Why a node may not read this Secret, ConfigMap or ResourceClaim ("" when it may), in kube's
        words."""
        if info.verb not in ("get", "list", "watch"):
            return "can only read resources of this type"
        if info.subresource:
            return "cannot read subresource"
        if not info.namespace:
            return "can only read namespaced object of this type"
        if not info.name:
            return "No Object name found"
        if self.graph is None or not self.graph.has_path(node, info.resource, info.namespace, info.name):
            return f"no relationship found between node '{node}' and this object"
        return ""


EVERYTHING = (rule("*", groups=("*",), resources=("*",)), rule("*", urls=("*",)))
NODE_LEASE_RULE = rule(
    " ".join(sorted(NODE_LEASE_VERBS)), groups=("coordination.k8s.io",), resources=("leases",)
)


def rules_for(authorizer: Authorizer | None, user: UserInfo, namespace: str) -> tuple[Rule, ...]:
    """The rules that apply to `user` in `namespace`, for SelfSubjectRulesReview (`auth can-i --list`).
    The node's lease rule is listed in kube-node-lease only, without its name limit."""
    if not isinstance(authorizer, NodeRBACAuthorizer) or MASTERS_GROUP in user.groups:
        return EVERYTHING
    rules: list[Rule] = [*DISCOVERY_RULES]
    if MONITORING_GROUP in user.groups:
        rules += MONITORING_RULES
    if SERVICEACCOUNTS_GROUP in user.groups:
        rules += ISSUER_DISCOVERY_RULES
    if user.name == SCHEDULER_USER:
        rules += [r for r in SCHEDULER_ALL_RULES if not r.names]
    if user.name == CONTROLLER_MANAGER_USER:
        rules += CONTROLLER_MANAGER_RULES
    if node_name_of(user) is not None:
        rules += NODE_RULES
        if namespace == NODE_LEASE_NAMESPACE:
            rules.append(NODE_LEASE_RULE)
    if authorizer.stored is not None:
        # rules limited to resourceNames are left out: the review's rule would grant more than they do
        rules += [
            Rule(r.verbs, r.api_groups, r.resources, r.urls)
            for r in authorizer.stored.rules_of(user, namespace)
            if not r.resource_names
        ]
    return tuple(rules)


def new_authorizer(mode: str, policy_file: Path | None = None) -> Authorizer:
    """`Node,RBAC` (the default; either name alone means the same chain here) or `AlwaysAllow`;
    `policy_file` adds its RBAC objects (raises ValueError naming the file and field)."""
    modes = {m.strip() for m in mode.split(",") if m.strip()}
    if modes == {"AlwaysAllow"}:
        if policy_file is not None:
            raise ValueError("--authorization-policy-file: needs --authorization-mode Node,RBAC")
        return AlwaysAllow()
    unknown = modes - {"Node", "RBAC"}
    if unknown or not modes:
        raise ValueError(
            f"--authorization-mode: unknown mode(s) {sorted(unknown) or [mode]}; use Node,RBAC or AlwaysAllow"
        )
    try:
        policy = ReloadingPolicy(policy_file) if policy_file is not None else None
    except PolicyError as exc:
        raise ValueError(f"--authorization-policy-file: {exc}") from None
    return NodeRBACAuthorizer(policy)
