"""Generate the Python gRPC modules from protos/ into kubenode/api/.

The .proto files live under protos/<api>/<version>/api.proto. Both APIs name their
file api.proto, so each is generated into its own package,
kubenode.api.<api>.<version>, by mapping protos/ to the virtual include path
kubenode/api; the generated imports are then package-absolute and need no patching.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PROTO_DIR = ROOT / "protos"
VIRTUAL_ROOT = "kubenode/api"


def proto_files() -> list[Path]:
    return sorted(PROTO_DIR.rglob("*.proto"))


def generate(out_dir: Path) -> None:
    """Run protoc (from grpcio-tools) for every .proto, writing under out_dir."""
    from grpc_tools import protoc  # dev dependency, imported lazily

    out_dir.mkdir(parents=True, exist_ok=True)
    for proto in proto_files():
        rel = proto.relative_to(PROTO_DIR).as_posix()
        args = [
            "grpc_tools.protoc",
            f"-I{VIRTUAL_ROOT}={PROTO_DIR}",
            f"--python_out={out_dir}",
            f"--pyi_out={out_dir}",
            f"--grpc_python_out={out_dir}",
            f"{VIRTUAL_ROOT}/{rel}",
        ]
        if protoc.main(args) != 0:
            raise SystemExit(f"protoc failed for {proto}")
    # Every directory on the way down is a package.
    for pkg_dir in (out_dir / VIRTUAL_ROOT).rglob("*"):
        if pkg_dir.is_dir():
            (pkg_dir / "__init__.py").touch()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--out", type=Path, default=ROOT, help="output root (default: the repository)")
    args = parser.parse_args(argv)
    generate(args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
