"""The agent's floors: no import inside `agent/` runs back up a floor.

The rule (docs/agent.md, "Where the code lives"): ground -> managers -> sync -> node -> server/nodestatus.
A module may import its own floor and the floors below it, never one above. Every import counts, the
lazy ones inside functions and those under TYPE_CHECKING too: a type-only import still makes the lower
package know the higher one. The count is read from the source with `ast`, so it can be taken on any tree:
`python tests/agent/test_layers.py [ROOT]` prints each import that runs back up and their number.
Counted this way on main before the agent's restructuring (issue 36, at b6164e0): 17 (13 into
agent/pod/podrecord.py, 3 into agent/node.py, 1 into agent/server/); after it: 0.
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

GROUND, MANAGERS, SYNC, NODE, TOP = range(5)
FLOOR_NAMES = ("ground", "managers", "sync", "node", "server/nodestatus")

# The longest prefix wins. A package not named here fails the test: a new package gets a floor on purpose.
LAYERS: dict[str, int] = {
    # The runtime-neutral types and helpers every manager shares (the kubelet's pkg/kubelet/container).
    "agent.container": GROUND,
    "agent.util": GROUND,
    # The managers: each owns one concern and knows only the ground and its peers.
    "agent.apis": MANAGERS,
    "agent.config": MANAGERS,
    "agent.lifecycle": MANAGERS,
    "agent.cm": MANAGERS,
    "agent.volumemanager": MANAGERS,
    "agent.prober": MANAGERS,
    "agent.status": MANAGERS,
    "agent.kuberuntime": MANAGERS,
    "agent.eviction": MANAGERS,
    "agent.logs": MANAGERS,
    "agent.stats": MANAGERS,
    "agent.certificate": MANAGERS,
    "agent.token": MANAGERS,
    # The pod manager, the pod workers and syncPod (the kubelet's root package around pod_workers.go).
    "agent.pod": SYNC,
    "agent.podworkers": SYNC,
    "agent.node": NODE,
    "agent.housekeeping": NODE,
    # What serves the node or joins it to a cluster, and the composition roots.
    "agent.server": TOP,
    "agent.nodestatus": TOP,
    "agent.daemon": TOP,
    "agent.cli": TOP,
    "agent.drain": TOP,
    "agent.starterrors": TOP,
    "agent.hollow": TOP,
    "agent": TOP,  # agent/__init__.py
}

# Imports that run back up on purpose, each with its reason (none today).
ALLOWED: dict[tuple[str, str], str] = {}

REPO = Path(__file__).resolve().parents[2]


def floor_of(module: str) -> int:
    parts = module.split(".")
    for end in range(len(parts), 0, -1):
        floor = LAYERS.get(".".join(parts[:end]))
        if floor is not None:
            return floor
    raise KeyError(f"{module}: no floor in tests/agent/test_layers.py LAYERS")


def module_name(root: Path, path: Path) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def imported_modules(tree: ast.AST, package: str) -> set[str]:
    """Every agent module this source imports (`from agent import x` counts agent.x)."""
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names if a.name.startswith("agent"))
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:  # relative: resolved against the importing package
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*anchor, base] if base else anchor)
            if base == "agent" or base.startswith("agent."):
                found.update(f"{base}.{a.name}" if base == "agent" else base for a in node.names)
    return found


def upward_imports(root: Path) -> list[tuple[str, str]]:
    """(importer, imported) for every import inside agent/ under `root` that runs back up a floor."""
    upward = []
    for path in sorted((root / "agent").rglob("*.py")):
        importer = module_name(root, path)
        package = importer if path.name == "__init__.py" else importer.rpartition(".")[0]
        tree = ast.parse(path.read_text(), str(path))
        for imported in sorted(imported_modules(tree, package)):
            if floor_of(imported) > floor_of(importer):
                upward.append((importer, imported))
    return upward


def test_no_import_in_the_agent_runs_back_up_a_floor() -> None:
    upward = [edge for edge in upward_imports(REPO) if edge not in ALLOWED]
    assert upward == [], "\n".join(
        f"{a} ({FLOOR_NAMES[floor_of(a)]}) imports {b} ({FLOOR_NAMES[floor_of(b)]})" for a, b in upward
    )


def test_the_allow_list_holds_only_imports_that_exist() -> None:
    assert set(ALLOWED) <= set(upward_imports(REPO))


def test_the_ground_floor_imports_no_manager() -> None:
    for path in sorted((REPO / "agent" / "container").rglob("*.py")):
        importer = module_name(REPO, path)
        tree = ast.parse(path.read_text(), str(path))
        above = [m for m in imported_modules(tree, importer) if floor_of(m) > GROUND]
        assert above == [], f"{importer} imports {above}"


if __name__ == "__main__":
    tree_root = Path(sys.argv[1]) if len(sys.argv) > 1 else REPO
    edges = upward_imports(tree_root)
    for a, b in edges:
        print(f"{a} ({FLOOR_NAMES[floor_of(a)]}) -> {b} ({FLOOR_NAMES[floor_of(b)]})")
    print(f"{len(edges)} imports run back up a floor")
