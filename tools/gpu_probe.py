"""The CUDA probe tools/device_proof.sh runs inside process pods (the host's python3 with PyTorch).

Modes, each writing one JSON object to OUT (the pod's result, read back by the script):
  probe OUT                   what the pod sees: NVIDIA_VISIBLE_DEVICES, `nvidia-smi -L`, which /dev/nvidia*
                              nodes open (errno name when not), torch's CUDA device count and a 4096^2 matmul
  load OUT GO SECONDS         waits for the file GO, allocates 8 GiB, runs matrix products for SECONDS
  mps OUT LIMIT_MIB           under MPS: the total memory CUDA reports, and whether LIMIT_MIB + 2 GiB fits
"""

from __future__ import annotations

import errno
import glob
import importlib
import json
import os
import subprocess
import sys
import time
from typing import Any

MIB = 1 << 20


def _torch() -> Any:
    """PyTorch, imported by name: the device machine has it, the development machines do not."""
    return importlib.import_module("torch")


def _opens() -> dict[str, str]:
    nodes = sorted(glob.glob("/dev/nvidia*")) or ["/dev/nvidiactl", "/dev/nvidia0", "/dev/nvidia-uvm"]
    result = {}
    for node in nodes:
        try:
            os.close(os.open(node, os.O_RDWR))
            result[node] = "ok"
        except OSError as exc:
            result[node] = errno.errorcode.get(exc.errno or 0, str(exc.errno))
    return result


def _smi() -> list[str]:
    try:
        done = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True, timeout=60, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return [f"error: {exc}"]
    return [line for line in (done.stdout + done.stderr).splitlines() if line.strip()]


def probe() -> dict[str, Any]:
    found: dict[str, Any] = {
        "visible": os.environ.get("NVIDIA_VISIBLE_DEVICES", ""),
        "smi": _smi(),
        "dev": sorted(glob.glob("/dev/nvidia*")),
        "open": _opens(),
    }
    torch = _torch()
    found["cuda"] = bool(torch.cuda.is_available())
    found["count"] = torch.cuda.device_count() if found["cuda"] else 0
    if found["cuda"]:
        a = torch.randn(4096, 4096, device="cuda")
        began = time.perf_counter()
        b = a @ a
        torch.cuda.synchronize()
        found["matmul_ms"] = round((time.perf_counter() - began) * 1000, 2)
        found["matmul_ok"] = bool(torch.isfinite(b).all().item())
    return found


def load(go: str, seconds: float) -> dict[str, Any]:
    torch = _torch()
    a = torch.randn(8192, 8192, device="cuda")
    while not os.path.exists(go):
        time.sleep(0.1)
    # After the go file, so that the framebuffer the metrics show rises by it.
    held = torch.empty(8 * 1024 * MIB, dtype=torch.uint8, device="cuda")
    began, products = time.monotonic(), 0
    while time.monotonic() - began < seconds:
        a = (a @ a).clamp_(-1, 1)
        products += 1
        if products % 16 == 0:
            torch.cuda.synchronize()
    torch.cuda.synchronize()
    return {
        "products": products,
        "seconds": round(time.monotonic() - began, 2),
        "held_mib": held.numel() // MIB,
    }


def mps(limit_mib: int) -> dict[str, Any]:
    torch = _torch()
    free, total = torch.cuda.mem_get_info()
    found: dict[str, Any] = {
        "pipe": os.environ.get("CUDA_MPS_PIPE_DIRECTORY", ""),
        "total_mib": total // MIB,
        "free_mib": free // MIB,
    }
    try:
        over = torch.empty((limit_mib + 2048) * MIB, dtype=torch.uint8, device="cuda")
        found["over_limit_alloc"] = "succeeded"
        del over
    except RuntimeError as exc:  # torch.OutOfMemoryError is a RuntimeError
        found["over_limit_alloc"] = f"refused: {str(exc).splitlines()[0][:120]}"
    return found


def main(argv: list[str]) -> int:
    mode, out = argv[1], argv[2]
    try:
        if mode == "probe":
            result = probe()
        elif mode == "load":
            result = load(argv[3], float(argv[4]))
        elif mode == "mps":
            result = mps(int(argv[3]))
        else:
            raise SystemExit(f"gpu_probe: unknown mode {mode!r}")
    except Exception as exc:  # the script reads the error from OUT instead of a pod log
        result = {"error": f"{type(exc).__name__}: {exc}"}
    with open(out + ".tmp", "w") as f:
        json.dump(result, f)
    os.rename(out + ".tmp", out)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
