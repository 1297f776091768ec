"""`kubenode trace pod NAME` (parsed in cli/trace.py): one pod's whole path, scheduler to cgroup.

    API server   -> the pod (profile = spec.schedulerName, node, QoS) and its Scheduled or
                    FailedScheduling events (the scheduler's message); with ResourceClaims, each
                    claim's devices and every node's DRA verdict (cli/claimtrace.py);
    the Node     -> the agent's status endpoint (status.addresses + daemonEndpoints.kubeletEndpoint.Port);
    agent /pods  -> the devices allocated per container, the pod cgroup, the container pids, and under a
                    Topology Manager policy each resource's NUMA hints and the merged affinity;
    the kernel   -> the pod cgroup in every hierarchy with the limit files as read, the processes in it
                    with their /proc/<pid>/cgroup, the CPU used so far (cpuacct.usage or cpu.stat);
                    the env each container got from the device plugins, from /proc/<pid>/environ;
                    each container's own cgroup, its device rules and its /dev (cgroupview.container_view).

The plugins' env is what the process has beyond the agent's base (PATH, HOSTNAME, and the
KUBENODE_CONTAINER identity of agent/kuberuntime/processes.py) and the container's own `env`
(agent/kuberuntime/envvars.py builds a process's environment from exactly those). The cgroup and
process half needs this machine to be the pod's node (and root, to read other users' /proc); elsewhere
it says so and shows the API half.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys
from typing import Any

from cli import cgroupview
from cli.agentstatus import agent_pods, endpoint_of
from cli.claimtrace import trace_claims
from kubenode.kubeclient import EVENTS, PODS, KubeClient, KubeError, NotFound, load_kubeconfig

# The agent's base env, and the identity it stamps on each process it spawns (agent/kuberuntime/processes.py).
AGENT_BASE_ENV = ("PATH", "HOSTNAME", "KUBENODE_CONTAINER")
SERVICE_ENV_PREFIXES = ("KUBERNETES_SERVICE_", "KUBERNETES_PORT")  # the agent's default/kubernetes variables
SCHEDULING_REASONS = ("Scheduled", "FailedScheduling")


def run(args: argparse.Namespace) -> int:
    try:
        client = KubeClient(load_kubeconfig(args.kubeconfig or default_kubeconfig()))
    except (KubeError, OSError) as exc:
        print(f"kubenode trace: {exc}", file=sys.stderr)
        return 2
    try:
        result = trace_pod(client, args.namespace, args.name)
    except NotFound:
        print(f"kubenode trace: pod {args.namespace}/{args.name} not found", file=sys.stderr)
        return 1
    except KubeError as exc:
        print(f"kubenode trace: {exc}", file=sys.stderr)
        return 1
    finally:
        client.close()
    print(json.dumps(result, indent=2) if args.output == "json" else render(result))
    return 0


def default_kubeconfig() -> str:
    """kubectl's choice: the first file in $KUBECONFIG, else ~/.kube/config."""
    for path in os.environ.get("KUBECONFIG", "").split(os.pathsep):
        if path and os.path.exists(path):
            return path
    return os.path.expanduser("~/.kube/config")


def trace_pod(client: KubeClient, namespace: str, name: str) -> dict[str, Any]:
    pod = client.get(PODS, name, namespace)
    meta, spec, status = pod.get("metadata") or {}, pod.get("spec") or {}, pod.get("status") or {}
    node = spec.get("nodeName") or ""
    result: dict[str, Any] = {
        "pod": {
            "namespace": namespace,
            "name": name,
            "uid": meta.get("uid"),
            "phase": status.get("phase"),
            "qosClass": status.get("qosClass"),
        },
        "scheduling": {
            "profile": spec.get("schedulerName") or "default-scheduler",
            "node": node or None,
            "events": _scheduling_events(client, namespace, name, str(meta.get("uid") or "")),
        },
        "agent": None,
        "topology": None,
        "containers": [],
        "cgroup": None,
        "processes": [],
        "problems": [],
    }
    claims = trace_claims(client, pod)
    if claims is not None:
        result["claims"] = claims  # DRA: each claim's devices, and why other nodes did not fit
    if not node:
        result["problems"].append("not bound to a node yet")
        return result
    view = _agent_view(client, node, namespace, name, result["problems"])
    if view is None:
        return result
    kubenode = view.get("kubenode") or {}
    result["agent"] = {"endpoint": view["_endpoint"], "worker": kubenode.get("worker")}
    result["topology"] = kubenode.get("topology")
    statuses = {c.get("name"): c for c in (view.get("status") or {}).get("containerStatuses") or []}
    spec_env = {
        c.get("name"): {e.get("name") for e in c.get("env") or []} for c in spec.get("containers") or []
    }
    for container in spec.get("containers") or []:
        cname = container.get("name")
        pid = (statuses.get(cname) or {}).get("pid")
        environ = cgroupview.environment(pid) if pid else {}
        plugin_env = {
            k: v
            for k, v in sorted(environ.items())
            if k not in AGENT_BASE_ENV and k not in spec_env[cname] and not k.startswith(SERVICE_ENV_PREFIXES)
        }
        result["containers"].append(
            {
                "name": cname,
                "pid": pid,
                "devices": (kubenode.get("devices") or {}).get(cname) or {},
                "deviceSpecs": (kubenode.get("deviceSpecs") or {}).get(cname) or [],
                "pluginEnv": plugin_env,
                "isolation": cgroupview.container_view(pid) if pid else None,
            }
        )
    cgroup = str(kubenode.get("cgroup") or "")
    if not cgroup:
        result["problems"].append("the agent reports no pod cgroup (not started yet?)")
        return result
    hierarchies = cgroupview.hierarchies(cgroup)
    if not hierarchies:
        result["problems"].append(f"cgroup {cgroup} is not on this machine: run trace on node {node}")
    files = cgroupview.files_by_name(hierarchies)
    result["cgroup"] = {
        "path": cgroup,
        "version": 2 if cgroupview.is_v2() else 1,
        "hierarchies": hierarchies,
        "cpuUsageSeconds": cgroupview.cpu_seconds(files, hierarchies),
    }
    container_of = {c["pid"]: c["name"] for c in result["containers"] if c["pid"]}
    result["processes"] = [
        {
            "pid": pid,
            "container": _container_of(pid, container_of),
            "command": cgroupview.command_line(pid),
            "cgroups": cgroupview.membership(pid),
        }
        for pid in cgroupview.processes(hierarchies)
    ]
    return result


def _scheduling_events(client: KubeClient, namespace: str, name: str, uid: str) -> list[dict[str, Any]]:
    page = client.list(EVENTS, namespace, field_selector=f"involvedObject.name={name}")
    events = []
    for event in page.get("items") or []:
        involved = event.get("involvedObject") or {}
        if event.get("reason") not in SCHEDULING_REASONS or (uid and involved.get("uid") not in (uid, None)):
            continue
        source = event.get("source") or {}
        events.append(
            {
                "reason": event.get("reason"),
                "type": event.get("type"),
                "message": event.get("message") or event.get("note"),
                "from": event.get("reportingComponent") or source.get("component"),
                "count": event.get("count") or 1,
                "lastTimestamp": event.get("lastTimestamp") or event.get("eventTime"),
            }
        )
    return sorted(events, key=lambda e: str(e["lastTimestamp"] or ""))


def _agent_view(
    client: KubeClient, node: str, namespace: str, name: str, problems: list[str]
) -> dict[str, Any] | None:
    try:
        address = endpoint_of(client, node)
    except KubeError as exc:
        problems.append(f"node {node}: {exc}")
        return None
    if not address:
        problems.append(f"node {node} reports no daemon endpoint")
        return None
    try:
        status = agent_pods(address)
    except (OSError, ValueError) as exc:
        problems.append(f"the agent of node {node} at {address}: {exc}")
        return None
    for item in status.get("items") or []:
        meta = item.get("metadata") or {}
        if meta.get("namespace") == namespace and meta.get("name") == name:
            return {**item, "_endpoint": address}
    problems.append(f"the agent of node {node} does not run the pod (yet)")
    return None


def _container_of(pid: int, container_of: dict[int, str]) -> str | None:
    """The container whose main process is pid or one of its ancestors."""
    import psutil

    with contextlib.suppress(psutil.Error):
        process: psutil.Process | None = psutil.Process(pid)
        while process is not None:
            if process.pid in container_of:
                return container_of[process.pid]
            process = process.parent()
    return None


# -- text ---------------------------------------------------------------------------------------------


def topology_lines(topology: dict[str, Any] | None) -> list[str]:
    """The Topology Manager's view: per merge unit each resource's hints, then the merged affinity."""
    if not topology:
        return []
    lines = [f"Topology   policy {topology['policy']}  scope {topology['scope']}"]
    for decision in topology["decisions"]:
        verdict = "admitted" if decision["admitted"] else "refused: TopologyAffinityError"
        lines.append(f"           {decision['container']}: merged {decision['merged']}, {verdict}")
        for resource, hints in decision["hints"].items():
            shown = hints if isinstance(hints, str) else " ".join(hints) or "none possible"
            lines.append(f"             hints {resource}: {shown}")
    return lines


def render(result: dict[str, Any]) -> str:
    pod, scheduling = result["pod"], result["scheduling"]
    lines = [
        f"Pod        {pod['namespace']}/{pod['name']}  uid {pod['uid']}",
        f"           phase {pod['phase']}  QoS {pod['qosClass']}",
        f"Scheduler  profile {scheduling['profile']} -> node {scheduling['node'] or '<none>'}",
    ]
    for event in scheduling["events"]:
        lines.append(f"           {event['reason']} (x{event['count']}, {event['from']}): {event['message']}")
    if result["agent"]:
        lines.append(f"Agent      {result['agent']['endpoint']}  worker {result['agent']['worker']}")
    lines += topology_lines(result.get("topology"))
    for container in result["containers"]:
        devices = " ".join(f"{r}={','.join(ids)}" for r, ids in sorted(container["devices"].items())) or "-"
        lines.append(f"Container  {container['name']}  pid {container['pid']}  devices {devices}")
        for key, value in container["pluginEnv"].items():
            lines.append(f"             env {key}={value}")
        for spec in container["deviceSpecs"]:
            lines.append(f"             device {spec}")
        isolation = container.get("isolation") or {}
        if isolation:
            lines.append(f"             cgroup {isolation['cgroup']}")
            for rule in isolation.get("deviceRules") or []:
                lines.append(f"             allows {rule}")
            if "devicePrograms" in isolation:
                lines.append(f"             device programs {isolation['devicePrograms']}")
            lines.append(f"             /dev {' '.join(isolation.get('dev') or [])}")
    cgroup = result["cgroup"]
    if cgroup:
        usage = cgroup["cpuUsageSeconds"]
        shown = "-" if usage is None else f"{usage:.3f} s"
        lines.append(f"Cgroup     {cgroup['path']}  (v{cgroup['version']})  CPU used {shown}")
        for name, hierarchy in cgroup["hierarchies"].items():
            values = "  ".join(f"{k}={v}" for k, v in hierarchy["files"].items())
            lines.append(f"  {name:<9}{hierarchy['path']}" + (f"\n             {values}" if values else ""))
    for process in result["processes"]:
        lines.append(
            f"Process    {process['pid']}  container {process['container'] or '-'}  {process['command']}"
        )
        cgroups = sorted(set(process["cgroups"].values()))
        lines.append(f"             in {', '.join(cgroups)}")
    for problem in result["problems"]:
        lines.append(f"Note       {problem}")
    return "\n".join(lines)
