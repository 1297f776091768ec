"""Command-line entry for `kubenode agent` (run the node agent), `agent status` and `agent drain`.

Errors are one line: a bad flag or config file names the flag or the file and key (exit 2); a failure
to start names the port, file or privilege at fault (agent/starterrors.py, exit 1). One agent per cgroup
root (kubenode/runlock.py): a second one would kill the first one's pods as orphans.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from kubenode.ports import AGENT_STATUS_PORT


def register(subparsers: Any) -> None:
    parser: argparse.ArgumentParser = subparsers.add_parser(
        "agent", help="run the node agent (a lightweight kubelet for processes)"
    )
    parser.add_argument("--config", type=Path, help="YAML settings file (flags override it)")
    parser.add_argument(
        "--manifests", type=Path, help="pod manifest directory (default /etc/kubenode/manifests)"
    )
    parser.add_argument("--node-name", help="node name (default: the host name)")
    parser.add_argument("--state-dir", type=Path, help="state: pod records, logs (default /var/lib/kubenode)")
    parser.add_argument(
        "--cgroup-root",
        help="cgroup under which kubepods is made "
        "(default: / with cgroupfs; with systemd, the agent's own delegated cgroup)",
    )
    parser.add_argument(
        "--cgroup-driver", choices=["cgroupfs", "systemd"], help="cgroup naming (default cgroupfs)"
    )
    parser.add_argument(
        "--device-plugin-dir",
        help="where device plugins register (default /var/lib/kubenode/device-plugins; 'none' disables)",
    )
    parser.add_argument(
        "--plugins-registry-dir",
        help="where DRA drivers put registration sockets (default /var/lib/kubenode/plugins_registry; "
        "'none' disables)",
    )
    parser.add_argument(
        "--listen", help=f"status endpoint HOST:PORT (default 127.0.0.1:{AGENT_STATUS_PORT}; '' disables)"
    )
    parser.add_argument(
        "--pod-pids-limit", type=int, help="pids.max of every pod cgroup (default -1: unlimited)"
    )
    parser.add_argument(
        "--container-log-max-size", help="rotate a container's log past this size (default 10Mi)"
    )
    parser.add_argument(
        "--container-log-max-files",
        type=int,
        help="log files kept per container, the live one included (default 5)",
    )
    evictions = parser.add_argument_group("the eviction manager (docs/agent.md)")
    evictions.add_argument(
        "--eviction-hard", help="hard thresholds: memory.available<100Mi,nodefs.available<10%%,..."
    )
    evictions.add_argument("--eviction-soft", help="soft thresholds, same form")
    evictions.add_argument(
        "--eviction-soft-grace-period", help="per soft threshold: memory.available=1m30s,..."
    )
    evictions.add_argument(
        "--eviction-minimum-reclaim", help="per signal: memory.available=0Mi,nodefs.available=500Mi"
    )
    evictions.add_argument(
        "--eviction-pressure-transition-period", type=float, help="seconds a pressure condition stays (300)"
    )
    evictions.add_argument(
        "--eviction-max-pod-grace-period", type=int, help="grace of a soft eviction, seconds (0: the pod's)"
    )
    parser.add_argument(
        "--allow-privileged",
        choices=["true", "false"],
        help="whether containers may run privileged: true (the default, as the kubelet's) or false",
    )
    topology = parser.add_argument_group("Topology Manager (the kubelet's; see docs/topology.md)")
    topology.add_argument(
        "--topology-manager-policy",
        help="none (default), best-effort, restricted or single-numa-node",
    )
    topology.add_argument("--topology-manager-scope", help="container (default) or pod")
    topology.add_argument(
        "--topology-manager-policy-options",
        help="key=value,...: prefer-closest-numa-nodes=true, max-allowable-numa-nodes=N",
    )
    parser.add_argument(
        "--container-runtime-endpoint",
        help="CRI runtime socket, unix:///path (containerd's); pods then run through it (docs/runtime.md)",
    )
    parser.add_argument("--pod-logs-dir", type=Path, help="where CRI pods' logs go (default /var/log/pods)")
    cluster = parser.add_argument_group("joining a cluster (see docs/agent.md)")
    cluster.add_argument(
        "--kubeconfig", type=Path, help="join the cluster of this kubeconfig (Node, Lease, pods)"
    )
    cluster.add_argument(
        "--in-cluster", action="store_true", default=None, help="join with the pod's service account instead"
    )
    cluster.add_argument("--node-labels", help="labels for the Node: key=value,...")
    cluster.add_argument(
        "--register-with-taints", help="taints the Node registers with: key[=value]:Effect,..."
    )
    cluster.add_argument("--max-pods", type=int, help="pods this node runs at most (default 110)")
    cluster.add_argument(
        "--system-reserved", help="kept from allocatable for the system: cpu=500m,memory=1Gi,..."
    )
    cluster.add_argument(
        "--kube-reserved", help="kept from allocatable for Kubernetes daemons: cpu=...,memory=..."
    )
    actions = parser.add_subparsers(dest="action", metavar="[status|drain]")
    status = actions.add_parser("status", help="print the agent's pods as a table")
    status.add_argument("--listen", dest="status_listen", default=None, help="agent endpoint HOST:PORT")
    status.add_argument("--json", action="store_true", help="print the raw /pods JSON")
    drain = actions.add_parser(
        "drain",
        help="stop every pod the agent started and remove their cgroups, records and logs"
        " (the agent must be stopped)",
    )
    # The settings that say what the agent made; SUPPRESS keeps values given before `drain`.
    drain.add_argument("--config", type=Path, default=argparse.SUPPRESS, help="the agent's settings file")
    drain.add_argument("--state-dir", type=Path, default=argparse.SUPPRESS, help="the agent's --state-dir")
    drain.add_argument("--cgroup-root", default=argparse.SUPPRESS, help="the agent's --cgroup-root")
    drain.add_argument(
        "--cgroup-driver", choices=["cgroupfs", "systemd"], default=argparse.SUPPRESS, help="its driver"
    )
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    if args.action == "status":
        return _status(args)
    import os

    from agent.apis.config import describe_config_error
    from kubenode.model import ValidationError

    try:
        config = _config(args)
    except ValidationError as exc:
        print(f"kubenode agent: {describe_config_error(exc)}", file=sys.stderr)
        return 2
    # Pods are started with fork+exec while gRPC threads run; gRPC's fork handlers only add noise then.
    os.environ.setdefault("GRPC_ENABLE_FORK_SUPPORT", "false")
    from agent.daemon import run_agent
    from agent.drain import drain
    from agent.starterrors import describe_start_error
    from kubenode import runlock

    command = "kubenode agent drain" if args.action == "drain" else "kubenode agent"
    if args.action == "drain" and config.cgroup_driver == "systemd" and not config.cgroup_root:
        # The automatic root is the caller's own cgroup: right for the agent's unit, wrong for a shell.
        print(
            f"{command}: with --cgroup-driver systemd give --cgroup-root, the agent's cgroup"
            " (for the shipped unit: /system.slice/kubenode-agent.service)",
            file=sys.stderr,
        )
        return 2
    try:
        with runlock.hold(runlock.cgroup_root_lock_name(_lock_root(config)), command):
            return drain(config) if args.action == "drain" else run_agent(config)
    except runlock.LockHeld as exc:
        print(
            f"{command}: another kubenode agent, {exc.holder}, already uses {exc.name}:"
            " stop it first, or choose another --cgroup-root",
            file=sys.stderr,
        )
        return 1
    except ValidationError as exc:  # a kubeconfig that cannot be used (agent/nodestatus/cluster.py)
        print(f"{command}: {exc}", file=sys.stderr)
        return 2
    except Exception as exc:
        message = describe_start_error(exc, config.listen)
        if message is None:
            raise
        print(f"{command}: {message}", file=sys.stderr)
        return 1


def _lock_root(config: Any) -> str:
    """The cgroup root the agent will use; "" (automatic) is / with cgroupfs, the own cgroup with systemd."""
    if config.cgroup_root:
        return str(config.cgroup_root)
    from agent.cm.cgroups.delegation import default_cgroup_root
    from agent.cm.cgroups.detect import CGROUP_MOUNT, detect_version

    return default_cgroup_root(config.cgroup_driver, detect_version(CGROUP_MOUNT))


def _config(args: argparse.Namespace) -> Any:
    from agent.apis.config import load_config

    config = load_config(args.config)
    overrides = {
        "manifests": args.manifests,
        "node_name": args.node_name,
        "state_dir": args.state_dir,
        "cgroup_root": args.cgroup_root,
        "cgroup_driver": args.cgroup_driver,
        "listen": args.listen,
        "pod_pids_limit": args.pod_pids_limit,
        "kubeconfig": args.kubeconfig,
        "in_cluster": args.in_cluster,
        "node_labels": args.node_labels,
        "register_with_taints": args.register_with_taints,
        "max_pods": args.max_pods,
        "system_reserved": args.system_reserved,
        "kube_reserved": args.kube_reserved,
        "container_log_max_size": args.container_log_max_size,
        "eviction_hard": args.eviction_hard,
        "eviction_soft": args.eviction_soft,
        "eviction_soft_grace_period": args.eviction_soft_grace_period,
        "eviction_minimum_reclaim": args.eviction_minimum_reclaim,
        "eviction_pressure_transition_period": args.eviction_pressure_transition_period,
        "eviction_max_pod_grace_period": args.eviction_max_pod_grace_period,
        "container_log_max_files": args.container_log_max_files,
        "topology_manager_policy": args.topology_manager_policy,
        "topology_manager_scope": args.topology_manager_scope,
        "topology_manager_policy_options": args.topology_manager_policy_options,
        "container_runtime_endpoint": args.container_runtime_endpoint,
        "pod_logs_dir": args.pod_logs_dir,
    }
    for name, value in overrides.items():
        if value is not None:
            setattr(config, name, value)
    if args.allow_privileged is not None:
        config.allow_privileged = args.allow_privileged == "true"
    if args.device_plugin_dir is not None:
        config.device_plugin_dir = (
            None if args.device_plugin_dir in ("", "none") else Path(args.device_plugin_dir)
        )
    if args.plugins_registry_dir is not None:
        config.plugins_registry_dir = (
            None if args.plugins_registry_dir in ("", "none") else Path(args.plugins_registry_dir)
        )
    config.validate("command line")
    return config


def _status(args: argparse.Namespace) -> int:
    import json
    import urllib.error

    from agent.apis.config import load_config
    from agent.status.statustable import fetch, render
    from kubenode.model import ValidationError

    try:
        listen = args.status_listen or args.listen or load_config(args.config).listen
    except ValidationError as exc:
        print(f"kubenode agent status: {exc}", file=sys.stderr)
        return 2
    try:
        document = fetch(listen)
    except (urllib.error.URLError, OSError) as exc:
        print(
            f"kubenode agent status: cannot reach the agent at http://{listen}/pods: {exc}", file=sys.stderr
        )
        return 1
    print(json.dumps(document, indent=1) if args.json else render(document))
    return 0
