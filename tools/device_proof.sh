#!/usr/bin/env bash
# Proof run for a machine with an NVIDIA GPU and/or a cgroup v2 kernel (see docs/hardware-runs.md).
# Run as root from the checkout, with kubenode importable (installed, or PYTHONPATH=<checkout> plus its deps).
# It starts nothing it does not stop, and works in temp dirs and uniquely named cgroups only.
set -u
K="${KUBENODE:-python3 -m cli.main}"
work=$(mktemp -d /tmp/kn-proof.XXXXXX)
cg="kn-proof-$$"
waitfor() { for _ in $(seq 1 150); do eval "$1" && return 0; sleep 0.2; done; echo "TIMEOUT waiting for: $1"; return 1; }
podcg() { find "$1" -type d -name "*pod$2*" 2>/dev/null | head -1; }
cpu_milli() { # CPU used by cgroup $1 over $2 seconds, in millicores, from cpu.stat
  local u1 u2; u1=$(awk '/usage_usec/{print $2}' "$1/cpu.stat"); sleep "$2"
  u2=$(awk '/usage_usec/{print $2}' "$1/cpu.stat"); echo $(((u2 - u1) / ($2 * 1000)))
}

echo "== machine"
uname -r; python3 --version; nproc
command -v nvidia-smi >/dev/null && nvidia-smi --query-gpu=name,uuid,pci.bus_id,driver_version --format=csv
echo "cgroup fs: $(stat -fc %T /sys/fs/cgroup)"

if command -v nvidia-smi >/dev/null; then
  echo "== GPU: NVML discovery"
  $K deviceplugin discover --backend gpu
  echo "== GPU: NVML health path (event registration and wait, probe, an Xid through the health state machine)"
  python3 - <<'EOF'
import threading, time
from deviceplugin.backends.gpu import GpuBackend
from deviceplugin.config import GpuOptions
backend = GpuBackend("nvidia.com/gpu", GpuOptions())
changed = threading.Event()
backend.start(changed.set)
time.sleep(3)
gpu = backend.devices()[0].id
print("after 3 s of the monitor thread in NVML's event wait:", backend.devices(), "changes:", changed.is_set())
with backend._lock:
    backend.health.on_xid(gpu, 79)
print("after critical Xid 79:", backend.devices())
print("real NVML probe of", gpu, "->", backend._nvml.probe(gpu))
backend.stop()
EOF
  echo "== GPU: kubenode conformance against the real GPU plugin"
  printf 'version: v1\nresources:\n  - name: nvidia.com/gpu\n    backend: gpu\n    gpu: {idStrategy: uuid, failOnInitError: true}\n' > "$work/gpu.yaml"
  timeout 120 $K conformance --plugin-cmd "$K deviceplugin --config $work/gpu.yaml"
fi

if [ "$(stat -fc %T /sys/fs/cgroup)" = cgroup2fs ]; then
  echo "== cgroup v2: controllers $(cat /sys/fs/cgroup/cgroup.controllers)"
  mkdir -p "$work/m" "$work/dp"
  cat > "$work/m/pinned.yaml" <<'EOF'
apiVersion: v1
kind: Pod
metadata: {name: pinned, uid: aaaaaaaa-0000-0000-0000-000000000001}
spec:
  containers:
    - name: main
      command: [sh, -c, 'grep Cpus_allowed_list /proc/self/status; sleep 1000']
      resources:
        limits: {kubenode.io/cpu: 2, cpu: "2", memory: 32Mi}
EOF
  cat > "$work/limited.yaml" <<'EOF'
apiVersion: v1
kind: Pod
metadata: {name: limited, uid: bbbbbbbb-0000-0000-0000-000000000002}
spec:
  containers:
    - name: spin
      command: [sh, -c, 'while :; do :; done']
      resources:
        limits: {cpu: 200m, memory: 64Mi}
EOF
  cp "$work/limited.yaml" "$work/m/"
  $K deviceplugin --config tests/configs/cpu.yaml --kubelet-dir "$work/dp" > "$work/plugin.log" 2>&1 &
  plugin=$!
  agent_cmd="$K agent --manifests $work/m --state-dir $work/state --cgroup-root /$cg --device-plugin-dir $work/dp --listen ''"
  eval "exec $agent_cmd" > "$work/agent.log" 2>&1 &
  agent=$!
  waitfor '[ -n "$(podcg /sys/fs/cgroup/$cg aaaaaaaa)" ] && [ -n "$(podcg /sys/fs/cgroup/$cg bbbbbbbb)" ]'
  sleep 1
  for uid in aaaaaaaa bbbbbbbb; do
    p=$(podcg /sys/fs/cgroup/$cg $uid); echo "-- ${p#/sys/fs/cgroup/}"
    for f in cpuset.cpus cpuset.cpus.effective cpu.max cpu.weight memory.max pids.max; do echo "   $f: $(cat "$p/$f")"; done
  done
  p=$(podcg /sys/fs/cgroup/$cg aaaaaaaa); pid=$(head -1 "$p/cgroup.procs")
  echo "   pinned pid $pid $(grep Cpus_allowed_list /proc/$pid/status | tr -s '\t' ' ')"
  echo "   the 200m busy loop used $(cpu_milli "$(podcg /sys/fs/cgroup/$cg bbbbbbbb)" 5)m CPU over 5 s"
  echo "== cgroup v2: SIGKILL the agent, restart, adoption"
  kill -9 "$agent"; wait "$agent" 2>/dev/null
  eval "exec $agent_cmd" >> "$work/agent.log" 2>&1 &
  agent=$!
  waitfor 'grep -q "adopted running containers" "$work/agent.log"' || tail -25 "$work/agent.log" | sed 's/^/   agent: /'
  echo "   pinned pod's processes after the restart: $(tr '\n' ' ' < "$p/cgroup.procs") (first was $pid)"
  rm "$work/m/"*.yaml
  if waitfor '[ -z "$(find /sys/fs/cgroup/$cg -name "pod*" -type d)" ]'; then  # pod<uid>, not kubepods
    echo "   manifests removed: no pod cgroup left"
  else
    tail -12 "$work/agent.log" | sed 's/^/   agent: /'
    for p in $(find /sys/fs/cgroup/$cg -name "pod*" -type d); do echo "   left: ${p#/sys/fs/cgroup/} procs: $(tr '\n' ' ' < "$p/cgroup.procs")"; done
  fi
  kill "$agent" "$plugin"; wait "$agent" "$plugin" 2>/dev/null

  echo "== cgroup v2: systemd driver in a handed-over cgroup (what Delegate=yes gives)"
  mkdir "/sys/fs/cgroup/$cg.service"
  cp "$work/limited.yaml" "$work/m/"
  sh -c "echo \$\$ > /sys/fs/cgroup/$cg.service/cgroup.procs; exec $K agent --cgroup-driver systemd --manifests $work/m --state-dir $work/state2 --device-plugin-dir none --listen ''" > "$work/agent2.log" 2>&1 &
  agent=$!
  waitfor '[ -n "$(podcg /sys/fs/cgroup/$cg.service bbbbbbbb)" ]'
  find "/sys/fs/cgroup/$cg.service" -type d | sed 's|/sys/fs/cgroup/|   |'
  echo "   agent's own cgroup: $(cat /proc/$agent/cgroup)"
  p=$(podcg "/sys/fs/cgroup/$cg.service" bbbbbbbb); sleep 1
  for f in cpu.max cpu.weight memory.max; do echo "   $f: $(cat "$p/$f")"; done
  echo "   the 200m busy loop used $(cpu_milli "$p" 3)m CPU over 3 s"
  rm "$work/m/limited.yaml"
  waitfor '[ -z "$(podcg /sys/fs/cgroup/$cg.service bbbbbbbb)" ]' && echo "   manifest removed: pod cgroup gone"
  kill "$agent"; wait "$agent" 2>/dev/null
  find "/sys/fs/cgroup/$cg.service" "/sys/fs/cgroup/$cg" -depth -type d -exec rmdir {} + 2>/dev/null
fi
rm -rf "$work"
