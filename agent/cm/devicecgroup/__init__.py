"""Device isolation for a container: which device nodes it may open or create (issue 37).

Modules: container.py (a container cgroup's rules through the controller its host has: what the pod
cgroup manager calls), rules.py (the typed rules, runc's defaults, a rule from a device spec, the
effective set), v1.py (the cgroup v1 devices controller), bpfprog.py (the cgroup v2 program, as bytes), bpf.py
(bpf(2): load, attach, query, detach, replace), choose.py (which of the two a host gets).

Wiring (done for process pods: agent/kuberuntime/isolation.py and the pod cgroup manager's
`ensure_container`; CDI devices' nodes come from agent/cm/cdidevices.py's resolved edits), per container:
1. Before forking: `rules.container_rules([(d.host_path, d.permissions) for d in resources.devices],
   privileged)` plus, for CDI devices, the rules of the resolved edits' device nodes
   (kubenode.cdi.resolve). Any DeviceRuleError fails the container with its one line.
2. Make the container's cgroup in the device controller's tree and enforce the rules:
   `v1.apply_v1(dir, rules)` or `bpf.replace_device_program(dir, rules)` as `choose.enforcement()` says.
3. Fork; the child joins that cgroup (with its others) before it runs anything, builds /dev
   (agent/kuberuntime/devfs.py), then execs. On a pod update, step 2 again; on removal, the cgroup's
   rmdir takes the rules (and the program) with it.
"""

from agent.cm.devicecgroup.bpf import attached_programs

# `attached_programs` is the package's one public name outside the agent: `kubenode trace pod` counts the
# device programs on a container's cgroup with it (cli/cgroupview.py).
__all__ = ["attached_programs"]
