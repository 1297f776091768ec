"""`make k8s`: build the real Kubernetes components (and the third-party peers) that the interop tests and
the peer benchmarks run beside kubenode, from the pinned Go modules under interop/.

Flow: for each component (one Go module under interop/<name>/, go.mod and go.sum committed) -> its cache key
is the SHA-256 of its go.mod, go.sum and build recipe (packages, tags, ldflags, cgo) -> a cache directory
`$KUBENODE_K8S_CACHE/<name>-<key>/` (default ~/.cache/kubenode/k8s) that holds a complete build is used as
it is, otherwise `go build` fills it (into a temporary directory, renamed when whole) -> `.k8s/bin/<binary>`
links to each cached binary, which is where harness/k8s looks. A second run with nothing changed builds
nothing. `-mod=readonly`: a go.mod that is not tidy fails here instead of being rewritten; nothing is
upgraded (never `go get -u`: the newest kube-openapi and friends need Go 1.27).

Usage: python tools/k8s_build.py [--only NAME ...] [--list]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
INTEROP = ROOT / "interop"
LINKS = ROOT / ".k8s" / "bin"
KUBE_VERSION = "v1.37.2"
# As kube's hack/lib/version.sh stamps its release binaries (`kubelet --version` prints v1.37.2).
KUBE_LDFLAGS = (
    f"-X k8s.io/component-base/version.gitVersion={KUBE_VERSION}",
    "-X k8s.io/component-base/version.gitMajor=1",
    "-X k8s.io/component-base/version.gitMinor=37",
    f"-X k8s.io/client-go/pkg/version.gitVersion={KUBE_VERSION}",
    "-X k8s.io/component-base/version.gitTreeState=clean",
)


@dataclass(frozen=True)
class Component:
    name: str  # the module's directory under interop/
    packages: dict[str, str]  # binary name -> Go package
    tags: tuple[str, ...] = ()
    ldflags: tuple[str, ...] = ()
    cgo: bool = False
    apt: tuple[str, ...] = ()  # Debian packages a cgo build needs
    env: dict[str, str] = field(default_factory=dict)

    def key(self) -> str:
        digest = hashlib.sha256()
        for name in ("go.mod", "go.sum"):
            digest.update((INTEROP / self.name / name).read_bytes())
        recipe = [sorted(self.packages.items()), self.tags, self.ldflags, self.cgo, sorted(self.env.items())]
        digest.update(json.dumps(recipe).encode())
        return digest.hexdigest()[:16]


COMPONENTS = (
    Component(
        "kube",
        {
            "kubelet": "k8s.io/kubernetes/cmd/kubelet",
            "kube-apiserver": "k8s.io/kubernetes/cmd/kube-apiserver",
            "kube-scheduler": "k8s.io/kubernetes/cmd/kube-scheduler",
            "kube-controller-manager": "k8s.io/kubernetes/cmd/kube-controller-manager",
        },
        # hack/lib/golang.sh's tags for release binaries.
        tags=("selinux", "notest", "grpcnotrace"),
        ldflags=KUBE_LDFLAGS,
    ),
    Component("etcd", {"etcd": "go.etcd.io/etcd/server/v3"}),
    Component(
        "containerd",
        {
            "containerd": "github.com/containerd/containerd/v2/cmd/containerd",
            "containerd-shim-runc-v2": "github.com/containerd/containerd/v2/cmd/containerd-shim-runc-v2",
            "ctr": "github.com/containerd/containerd/v2/cmd/ctr",
        },
        # btrfs needs cgo and is not used (the overlayfs snapshotter is); no_btrfs says so explicitly.
        tags=("no_btrfs",),
        ldflags=(
            "-X github.com/containerd/containerd/v2/version.Version=v2.4.2",
            "-X github.com/containerd/containerd/v2/version.Package=github.com/containerd/containerd/v2",
        ),
    ),
    Component(
        "runc",
        {"runc": "github.com/opencontainers/runc"},
        # seccomp profiles (RuntimeDefault) need libseccomp through cgo, as runc's own release build.
        tags=("seccomp",),
        ldflags=("-X main.version=1.5.3",),
        cgo=True,
        apt=("libseccomp-dev", "gcc", "pkg-config"),
    ),
    Component(
        "critools",
        {"crictl": "sigs.k8s.io/cri-tools/cmd/crictl"},
        ldflags=("-X sigs.k8s.io/cri-tools/pkg/version.Version=v1.37.0",),
    ),
    Component(
        "draexample",
        {"dra-example-kubeletplugin": "sigs.k8s.io/dra-example-driver/cmd/dra-example-kubeletplugin"},
    ),
    Component("gdp", {"generic-device-plugin": "github.com/squat/generic-device-plugin"}),
)


def cache_root() -> Path:
    configured = os.environ.get("KUBENODE_K8S_CACHE")
    if configured:
        return Path(configured)
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "kubenode" / "k8s"


def ensure_apt(packages: tuple[str, ...]) -> None:
    missing = [
        p
        for p in packages
        if subprocess.run(
            ["dpkg-query", "-W", "-f=${Status}", p], capture_output=True, text=True, check=False
        ).stdout
        != "install ok installed"
    ]
    if not missing:
        return
    if os.geteuid() != 0:
        raise SystemExit(f"k8s_build: missing Debian packages {' '.join(missing)} and not root")
    print(f"k8s_build: installing {' '.join(missing)}", flush=True)
    apt = ["apt-get", "-o", "DPkg::Lock::Timeout=600", "-y", "-q"]
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    install = [*apt, "install", "--no-install-recommends", *missing]
    if subprocess.run(install, env=env, check=False).returncode != 0:
        subprocess.run([*apt, "update"], env=env, check=True)
        subprocess.run(install, env=env, check=True)


def build(component: Component, target: Path) -> float:
    """Builds the component's binaries into `target` (made whole, then renamed); returns the seconds."""
    ensure_apt(component.apt)
    started = time.monotonic()
    target.parent.mkdir(parents=True, exist_ok=True)
    scratch = Path(tempfile.mkdtemp(prefix=f".{target.name}.", dir=target.parent))
    try:
        env = {
            **os.environ,
            "CGO_ENABLED": "1" if component.cgo else "0",
            "GOFLAGS": "-mod=readonly",
            **component.env,
        }
        flags = ["-trimpath", "-ldflags", " ".join(("-s", "-w", *component.ldflags))]
        if component.tags:
            flags += ["-tags", ",".join(component.tags)]
        (scratch / "bin").mkdir()
        for binary, package in component.packages.items():
            # One `go build -o` per binary: the output is named as the binary, not as the package's path.
            output = str(scratch / "bin" / binary)
            subprocess.run(
                ["go", "build", *flags, "-o", output, package],
                cwd=INTEROP / component.name,
                env=env,
                check=True,
            )
        (scratch / "complete").write_text(json.dumps({"built": time.time(), "packages": component.packages}))
        if target.exists():
            shutil.rmtree(target)
        scratch.rename(target)
    finally:
        if scratch.exists():
            shutil.rmtree(scratch)
    return time.monotonic() - started


def link(component: Component, target: Path) -> None:
    LINKS.mkdir(parents=True, exist_ok=True)
    for binary in component.packages:
        path = LINKS / binary
        if path.is_symlink() or path.exists():
            path.unlink()
        path.symlink_to(target / "bin" / binary)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    names = [c.name for c in COMPONENTS]
    parser.add_argument("--only", nargs="+", choices=names, help="build these components alone")
    parser.add_argument("--list", action="store_true", help="print each component's cache path and exit")
    args = parser.parse_args(argv)
    if shutil.which("go") is None:
        print("k8s_build: no `go` on PATH: the interop builds need Go 1.26", file=sys.stderr)
        return 2
    root = cache_root()
    chosen = [c for c in COMPONENTS if not args.only or c.name in args.only]
    for component in chosen:
        target = root / f"{component.name}-{component.key()}"
        if args.list:
            print(f"{component.name}: {target}")
            continue
        if (target / "complete").exists():
            print(f"k8s_build: {component.name}: cached at {target}", flush=True)
        else:
            print(f"k8s_build: {component.name}: building into {target}", flush=True)
            seconds = build(component, target)
            print(f"k8s_build: {component.name}: built in {seconds:.0f} s", flush=True)
        link(component, target)
    if not args.list:
        print(f"k8s_build: binaries linked under {LINKS.relative_to(ROOT)}/")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
