#!/usr/bin/env bash
# Proof run for a machine with an NVIDIA GPU and/or a cgroup v2 kernel (see docs/hardware-runs.md).
# Run as root from the checkout, with kubenode importable (installed, or PYTHONPATH=<checkout> plus its deps).
# It starts nothing it does not stop, and works in temp dirs and uniquely named cgroups only.
# `--dry-run` writes and checks the GPU pods' configs and manifests, names what is missing, and starts nothing.
# The GPU pods (issues 37, 38) need PyTorch for python3, nvidia-cuda-mps-control, and for the CRI pod containerd
# and runc on PATH or KN_DEBS=<dir of Debian's containerd and runc .debs> (unpacked, not installed) and /bin/busybox.
# Each proof prints one PASS or FAIL line with its figures; the exit status is 1 when any FAIL was printed.
set -u
dry=0; [ "${1:-}" = --dry-run ] && dry=1
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

# -- GPU pods through `kubenode up` (issues 37 and 38) ----------------------------------------------------------
# One cluster (API server, agent, the NVML gpu plugin with CDI, GFD feature file and /metrics, scheduler) per
# phase; `kubenode up` stops everything it started on SIGTERM. Results come back as JSON files the pods write.
PY=$(command -v python3)
fails=0
check() { # check NAME CONDITION-EXIT-STATUS FIGURES
  if [ "$2" = 0 ]; then echo "PASS $1  $3"; else echo "FAIL $1  $3"; fails=$((fails + 1)); fi
}
waitlong() { # waitlong SECONDS CONDITION
  local end=$((SECONDS + $1)); while [ $SECONDS -lt "$end" ]; do eval "$2" && return 0; sleep 0.5; done
  echo "TIMEOUT (${1} s) waiting for: $2"; return 1
}
jget() { "$PY" -c 'import json,sys; d=json.load(open(sys.argv[1])); print(eval(sys.argv[2], {}, {"d": d}))' "$@" 2>/dev/null; }
pod_manifest() { # pod_manifest NAME GPUS ARGS... -> a process pod running the probe (no image: host processes)
  local name=$1 gpus=$2; shift 2
  local args="" limits=""; for a in "$@"; do args="$args, \"$a\""; done
  [ "$gpus" != 0 ] && limits="      resources: {limits: {nvidia.com/gpu: \"$gpus\"}}"
  printf 'apiVersion: v1\nkind: Pod\nmetadata: {name: %s}\nspec:\n  restartPolicy: Never\n  containers:\n    - name: main\n      command: ["%s", "%s"%s]\n      env: [{name: PYTHONPATH, value: "%s"}]\n%s\n' \
    "$name" "$PY" "$PWD/tools/gpu_probe.py" "$args" "${PYTHONPATH:-}" "$limits"
}
gpu_plugin_config() { # gpu_plugin_config DATA_DIR [MPS_REPLICAS]
  printf 'version: v1\nresources:\n  - name: nvidia.com/gpu\n    backend: gpu\n    gpu:\n'
  printf '      idStrategy: uuid\n      failOnInitError: true\n      cdi: true\n      cdiSpecDir: %s/cdi\n' "$1"
  printf '      podResourcesSocket: %s/device-plugins/pod-resources.sock\n      podLogsDir: %s/pod-logs\n' "$1" "$1"
  printf '      featuresFile: %s/features.d/kubenode-gfd\n' "$1"
  [ -n "${2:-}" ] && printf '      sharing: {mps: {resources: [{name: nvidia.com/gpu, replicas: %s}]}}\n      mpsRoot: %s/mps\n' "$2" "$1"
  return 0
}
up_pid=""; ctrd_pid=""
up_start() { # up_start DATA_DIR PODS_DIR [CRI ENDPOINT]
  mkdir -p "$1"
  local cri=(); [ -n "${3:-}" ] && cri=(--container-runtime-endpoint "$3")
  $K up --data-dir "$1" --pods "$2" --plugin-config "$1.plugins.yaml" --cgroup-root "/$cg-up" --port 0 "${cri[@]}" \
    > "$1.log" 2>&1 &
  up_pid=$!
  waitlong 120 "grep -q 'node .* Ready' '$1.log' || ! kill -0 $up_pid 2>/dev/null" && kill -0 "$up_pid" 2>/dev/null \
    || { echo "FAIL kubenode up did not start:"; tail -30 "$1.log" | sed 's/^/   up: /'; fails=$((fails + 1)); return 1; }
}
up_stop() {
  [ -n "$up_pid" ] || return 0
  kill -TERM "$up_pid" 2>/dev/null; wait "$up_pid" 2>/dev/null; up_pid=""
}
ctrd_stop() { [ -n "$ctrd_pid" ] && kill -TERM "$ctrd_pid" 2>/dev/null && wait "$ctrd_pid" 2>/dev/null; ctrd_pid=""; }
trap 'up_stop; ctrd_stop' EXIT
kube() { # kube PYTHON-EXPRESSION over v1 (CoreV1Api) against the up cluster's kubeconfig
  "$PY" -c "from kubernetes import client, config
config.load_kube_config('$up_dir/kubeconfig'); v1 = client.CoreV1Api(); print($1)" 2>/dev/null
}
phase() { kube "v1.read_namespaced_pod('$1', 'default').status.phase"; }
scrape() { # scrape METRIC POD -> the largest value of that pod's series on the plugin's /metrics
  "$PY" -c 'import sys, urllib.request
text = urllib.request.urlopen(sys.argv[1], timeout=3).read().decode()
values = [float(l.rsplit(" ", 1)[1]) for l in text.splitlines() if l.startswith(sys.argv[2] + "{") and f"pod=\"{sys.argv[3]}\"" in l]
print(max(values) if values else "")' "$metrics" "$1" "$2" 2>/dev/null
}
gpu_workloads() {
  local out="$work/out" pods="$work/pods-a"; mkdir -p "$out" "$pods" "$work/pods-mps"
  up_dir="$work/up-a"
  gpu_plugin_config "$up_dir" > "$up_dir.plugins.yaml"
  pod_manifest gpu-probe 1 probe "$out/gpu-probe.json" > "$pods/gpu-probe.yaml"
  pod_manifest cpu-probe 0 probe "$out/cpu-probe.json" > "$pods/cpu-probe.yaml"
  # Created once the probes are done: it holds the one GPU until the script's go file.
  pod_manifest gpu-load 1 load "$out/gpu-load.json" "$out/go" 10 > "$work/gpu-load.yaml"
  # busybox has no nvidia-smi: the CDI spec mounts the host's (and the driver's libraries) into the container.
  printf 'apiVersion: v1\nkind: Pod\nmetadata: {name: cri-smi}\nspec:\n  restartPolicy: Never\n  containers:\n    - name: main\n      image: docker.io/library/busybox:kubenode\n      command: [nvidia-smi, -L]\n      resources: {limits: {nvidia.com/gpu: \"1\"}}\n' \
    > "$work/cri-smi.yaml"
  local cri_endpoint=""
  if [ -n "${KN_DEBS:-}" ] && ! command -v containerd >/dev/null; then  # Debian's containerd and runc, unpacked
    for deb in "$KN_DEBS"/*.deb; do dpkg-deb -x "$deb" "$work/debroot"; done
    export PATH="$work/debroot/usr/bin:$work/debroot/usr/sbin:$work/debroot/bin:$PATH"
  fi
  if [ "$dry" = 0 ] && command -v containerd >/dev/null && command -v runc >/dev/null && [ -x /bin/busybox ]; then
    "$PY" - "$work/ctrd.endpoint" <<'EOF' > "$work/containerd-harness.log" 2>&1 &
import signal, sys, threading
from harness.containerd import ContainerdProcess
stop = threading.Event()
signal.signal(signal.SIGTERM, lambda *_: stop.set())
with ContainerdProcess() as containerd:  # private config, socket and root; close() removes them
    open(sys.argv[1], "w").write(containerd.endpoint)
    stop.wait()
EOF
    ctrd_pid=$!
    waitlong 120 "[ -s '$work/ctrd.endpoint' ] || ! kill -0 $ctrd_pid 2>/dev/null"
    cri_endpoint=$(cat "$work/ctrd.endpoint" 2>/dev/null)
    [ -n "$cri_endpoint" ] && cp "$work/cri-smi.yaml" "$pods/"
  fi
  [ -n "$cri_endpoint" ] || [ "$dry" = 1 ] || { echo "FAIL CRI pod: no containerd (set KN_DEBS to a directory of containerd, runc .debs; busybox at /bin/busybox)"; fails=$((fails + 1)); tail -5 "$work/containerd-harness.log" 2>/dev/null; }
  if [ "$dry" = 1 ]; then
    gpu_plugin_config "$work/up-mps" 2 > "$work/up-mps.plugins.yaml"
    echo "dry run: the plugin configs through the plugin's parser, the pods through the client's V1Pod model:"
    "$PY" -c 'import sys
from deviceplugin.config import load_config
for path in sys.argv[1:]:
    gpu = load_config(path).resources[0]
    print("  ", path, "->", gpu.name, gpu.backend, "replicas", gpu.replicas)' "$up_dir.plugins.yaml" "$work/up-mps.plugins.yaml" \
      || fails=$((fails + 1))
    "$PY" -c 'import json, sys, yaml
from kubernetes.client import ApiClient
for path in sys.argv[1:]:
    pod = ApiClient().deserialize(json.dumps(yaml.safe_load(open(path))), "V1Pod", "application/json")
    c = pod.spec.containers[0]
    print("  ", path, "->", pod.metadata.name, c.image or "(process pod)", c.command[-3:], c.resources.limits if c.resources else None)' \
      "$pods"/*.yaml "$work/gpu-load.yaml" "$work/cri-smi.yaml" || fails=$((fails + 1))
    for tool in nvidia-smi nvidia-cuda-mps-control containerd runc; do command -v "$tool" >/dev/null || echo "   missing here: $tool"; done
    "$PY" -c 'import torch' 2>/dev/null || echo "   missing here: torch"
    return 0
  fi

  echo "== GPU pods (issue 37): one with a GPU, one without, through kubenode up with the NVML plugin"
  up_start "$up_dir" "$pods" "$cri_endpoint" || return 1
  grep "kubenode up:" "$up_dir.log" | sed 's/^/   /'
  metrics=$(grep -o 'http://127.0.0.1:[0-9]*/metrics' "$up_dir.log" | head -1)
  waitlong 180 "[ -s '$out/gpu-probe.json' ] && [ -s '$out/cpu-probe.json' ]"
  local want; want=$(kube "v1.read_namespaced_pod('gpu-probe', 'default').spec.containers[0].resources.limits['nvidia.com/gpu']")
  echo "   gpu-probe: $(cat "$out/gpu-probe.json" 2>/dev/null)"
  echo "   cpu-probe: $(cat "$out/cpu-probe.json" 2>/dev/null)"
  local cuda count smi; cuda=$(jget "$out/gpu-probe.json" 'd["cuda"] and d["matmul_ok"]'); count=$(jget "$out/gpu-probe.json" 'd["count"]')
  smi=$(jget "$out/gpu-probe.json" 'sum(1 for l in d["smi"] if l.startswith("GPU "))')
  [ "$cuda" = True ] && [ "$count" = "$want" ] && [ "$smi" = "$want" ]; check "issue37 GPU pod computes on its GPU" $? "allocation=$want torch.count=$count nvidia-smi-L=$smi matmul_ms=$(jget "$out/gpu-probe.json" 'd.get("matmul_ms")')"
  local nocuda opened; nocuda=$(jget "$out/cpu-probe.json" 'd["cuda"]')
  opened=$(jget "$out/cpu-probe.json" '",".join(sorted(set(d["open"].values())))')
  [ "$nocuda" = False ] && [ -n "$opened" ] && ! echo "$opened" | grep -qw ok && [ -z "$(echo "$opened" | tr ',' '\n' | grep -vE '^(EPERM|ENOENT|EACCES)$')" ]
  check "issue37 pod without a GPU sees none" $? "torch.cuda=$nocuda /dev/nvidia* opens: $opened (nodes seen: $(jget "$out/cpu-probe.json" 'len(d["dev"])'))"

  echo "== issue 38: CRI pod through the CDI spec, GFD label, dcgm metrics under load"
  ls "$up_dir/cdi" | sed 's/^/   CDI spec: /'
  if [ -n "$cri_endpoint" ]; then
    waitlong 120 "[ \"\$(phase cri-smi)\" = Succeeded ] || [ \"\$(phase cri-smi)\" = Failed ]"
    local log; log=$(cat "$up_dir"/pod-logs/default_cri-smi_*/main/*.log 2>/dev/null)
    echo "$log" | sed 's/^/   cri-smi: /'
    echo "$log" | grep -q 'GPU 0: .*(UUID: GPU-'; check "issue38 CRI busybox pod runs nvidia-smi -L through CDI" $? "phase=$(phase cri-smi)"
  fi
  "$PY" -c "from kubernetes import client, config, utils
config.load_kube_config('$up_dir/kubeconfig'); utils.create_from_yaml(client.ApiClient(), '$work/gpu-load.yaml')" \
    || { echo "FAIL could not create the gpu-load pod"; fails=$((fails + 1)); }
  local product; product=$(kube "v1.list_node().items[0].metadata.labels.get('nvidia.com/gpu.product', '')")
  [ "$product" = NVIDIA-H100-80GB-HBM3 ]; check "issue38 Node label nvidia.com/gpu.product" $? "$product"
  waitlong 120 "[ \"\$(phase gpu-load)\" = Running ] && [ -n \"\$(scrape DCGM_FI_DEV_FB_USED gpu-load)\" ]"
  sleep 3  # its CUDA context and the 8192^2 operand made before the go file; the 8 GiB come after it
  local fb0 util=0 fb1=0 u f; fb0=$(scrape DCGM_FI_DEV_FB_USED gpu-load)
  touch "$out/go"
  for _ in $(seq 1 10); do
    sleep 1; u=$(scrape DCGM_FI_DEV_GPU_UTIL gpu-load); f=$(scrape DCGM_FI_DEV_FB_USED gpu-load)
    [ "${u%.*}" -gt "${util%.*}" ] 2>/dev/null && util=$u
    [ "${f%.*}" -gt "${fb1%.*}" ] 2>/dev/null && fb1=$f
  done
  grep -E 'GPU-UTIL|gpu-load' "$up_dir.log" | tail -4 | sed 's/^/   up table: /'
  [ "${util%.*}" -gt 50 ] 2>/dev/null; check "issue38 DCGM_FI_DEV_GPU_UTIL{pod=gpu-load} above 50 under load" $? "max ${util}% over 10 s"
  echo "   load pod: $(cat "$out/gpu-load.json" 2>/dev/null)"
  [ $(("${fb1%.*}" - "${fb0%.*}")) -ge 7168 ] 2>/dev/null
  check "issue38 DCGM_FI_DEV_FB_USED{pod=gpu-load} rose" $? "${fb0:-?} MiB before the go file, max ${fb1} MiB during (8192 MiB allocated after it)"
  up_stop

  echo "== issue 38: two MPS pods, each with its memory limit"
  up_dir="$work/up-mps"
  gpu_plugin_config "$up_dir" 2 > "$up_dir.plugins.yaml"
  local total limit; total=$(nvidia-smi --query-gpu=memory.total --format=csv,noheader,nounits -i 0 | tr -d ' ')
  limit=$((total / 2))
  for n in 1 2; do pod_manifest "mps-$n" 1 mps "$out/mps-$n.json" "$limit" > "$work/pods-mps/mps-$n.yaml"; done
  up_start "$up_dir" "$work/pods-mps" || return 1
  waitlong 180 "[ -s '$out/mps-1.json' ] && [ -s '$out/mps-2.json' ]"
  for n in 1 2; do
    echo "   mps-$n: $(cat "$out/mps-$n.json" 2>/dev/null)"
    local seen refused; seen=$(jget "$out/mps-$n.json" 'd["total_mib"]'); refused=$(jget "$out/mps-$n.json" 'd["over_limit_alloc"].startswith("refused")')
    [ "$refused" = True ] && [ -n "$seen" ] && [ "$seen" -le $((limit + limit / 50)) ]
    check "issue38 MPS pod mps-$n sees its memory limit" $? "CUDA total ${seen:-?} MiB, limit ${limit} MiB (GPU ${total} MiB / 2 replicas), over-limit allocation refused=$refused"
  done
  up_stop
  ctrd_stop
}

if [ "$dry" = 1 ]; then gpu_workloads; rm -rf "$work"; echo "dry run: $fails failures"; exit $((fails > 0)); fi

if command -v nvidia-smi >/dev/null; then
  echo "== GPU: NVML discovery"
  $K deviceplugin discover --backend gpu
  echo "== GPU: NVML health path (event registration and wait, probe, an Xid through the health state machine)"
  python3 - <<'EOF'
import threading, time
from deviceplugin.backends.gpu import GpuBackend
from deviceplugin.gpuconfig import GpuOptions
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

if command -v nvidia-smi >/dev/null; then
  gpu_workloads || echo "FAIL the GPU pods' section stopped early"
  up_stop; ctrd_stop
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
echo "== $fails FAIL lines"
exit $((fails > 0))
