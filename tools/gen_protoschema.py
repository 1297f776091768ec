"""Writes apiserver/protoschema_data.py: the protobuf field tables of the Kubernetes kinds this API server
reads, from k8s.io/api and k8s.io/apimachinery v0.37.2 in the Go module cache (generated.proto for the
field numbers and types, types.go for each field's JSON name, pointer-ness, omitempty and inlining).

    .venv/bin/python tools/gen_protoschema.py [GOMODCACHE]     # default ~/go/pkg/mod

apiserver/protoschema.py decodes any protobuf body of these kinds with the tables into the JSON Go's
encoding/json would write for the same object. Only needed again when the Kubernetes version changes.
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

VERSION = "v0.37.2"
# k8s.io/api packages (group dir/version) whose kinds the server stores or reads as request bodies
API_PACKAGES = (
    "core/v1", "apps/v1", "batch/v1", "coordination/v1", "events/v1", "resource/v1", "policy/v1",
    "storage/v1", "rbac/v1", "node/v1", "autoscaling/v1", "authentication/v1", "authorization/v1",
    "discovery/v1", "certificates/v1", "scheduling/v1", "networking/v1", "autoscaling/v2",
    "admissionregistration/v1", "storagemigration/v1",
)  # fmt: skip
MACHINERY_PACKAGES = ("pkg/apis/meta/v1", "pkg/runtime", "pkg/api/resource", "pkg/util/intstr")
OUT = Path(__file__).resolve().parents[1] / "apiserver" / "protoschema_data.py"

_MESSAGE = re.compile(r"^message (\w+) \{(.*?)^\}", re.M | re.S)
_FIELD = re.compile(r"^\s+(optional|repeated) ([\w.]+) (\w+) = (\d+);", re.M)
_MAP = re.compile(r"^\s+map<(\w+), ([\w.]+)> (\w+) = (\d+);", re.M)
_STRUCT = re.compile(r"^type (\w+) struct \{(.*?)^\}", re.M | re.S)
_GOFIELD = re.compile(r"^\t(?:(\w+)\s+)?(\S+)\s+`([^`]*)`", re.M)
_SLICE_TYPE = re.compile(r"^type (\w+) \[\]\w+", re.M)
SCALARS = {"string", "int32", "int64", "bool", "bytes"}


def _strip_comments(text: str) -> str:
    return re.sub(r"^\s*//.*$", "", text, flags=re.M)


def _go_fields(types_go: str) -> dict[tuple[str, str], tuple[str, str]]:
    """(struct, proto field name) -> (json name or "" for inline, flags: p pointer, o omitempty, i inline)."""
    out: dict[tuple[str, str], tuple[str, str]] = {}
    for struct, body in _STRUCT.findall(_strip_comments(types_go)):
        for _name, gotype, tags in _GOFIELD.findall(body):
            proto = re.search(r'protobuf:"([^"]*)"', tags)
            if not proto:
                continue
            pname = re.search(r"name=(\w+)", proto.group(1))
            if not pname:
                continue
            jtag = re.search(r'json:"([^"]*)"', tags)
            jparts = (jtag.group(1) if jtag else "").split(",")
            flags = ("p" if gotype.startswith("*") else "") + ("o" if "omitempty" in jparts[1:] else "")
            if jparts[0] == "" and (len(jparts) == 1 or "inline" in jparts[1:]):
                flags += "i"
            out[(struct, pname.group(1))] = (jparts[0] or pname.group(1), flags)
    return out


def _package(path: Path) -> tuple[str, list[tuple[str, str]]]:
    """(proto package, [(message name, body)])."""
    text = _strip_comments(path.read_text())
    package = re.search(r"^package ([\w.]+);", text, re.M)
    assert package, path
    return package.group(1), _MESSAGE.findall(text)


def build(modcache: Path) -> dict[str, dict[str, list[str]]]:
    dirs = [modcache / f"k8s.io/api@{VERSION}" / p for p in API_PACKAGES]
    dirs += [modcache / f"k8s.io/apimachinery@{VERSION}" / p for p in MACHINERY_PACKAGES]
    schema: dict[str, dict[str, list[str]]] = {}
    for directory in dirs:
        package, messages = _package(directory / "generated.proto")
        sources = sorted(p for p in directory.glob("*.go") if not p.name.endswith("_test.go"))
        go = "\n".join(p.read_text() for p in sources)
        go_fields = _go_fields(go)
        slices = set(_SLICE_TYPE.findall(go))
        names = {name for name, _ in messages}

        def qualify(kind: str, package: str = package, names: set[str] = names) -> str:
            if kind in SCALARS:
                return kind
            if kind.startswith("."):
                return kind[1:]
            return f"{package}.{kind}" if kind in names else kind

        for name, body in messages:
            table: dict[str, list[str]] = {}
            for label, kind, field, number in _FIELD.findall(body):
                json_name, flags = go_fields.get((name, field), (field, ""))
                if label == "repeated":
                    flags += "r"
                table[number] = [json_name, qualify(kind), flags]
            for key, value, field, number in _MAP.findall(body):
                json_name, flags = go_fields.get((name, field), (field, ""))
                table[number] = [json_name, f"map:{qualify(key)}:{qualify(value)}", flags]
            if name in slices:
                table["_list"] = ["items"]  # a named []string (ExtraValue, Verbs): JSON is the bare list
            schema[f"{package}.{name}"] = table
    return schema


def main() -> int:
    modcache = Path(sys.argv[1]) if len(sys.argv) > 1 else Path.home() / "go" / "pkg" / "mod"
    schema = build(modcache)
    text = json.dumps(schema, separators=(",", ":"), sort_keys=True)
    OUT.write_text(
        '"""Generated by tools/gen_protoschema.py from k8s.io/api and k8s.io/apimachinery '
        f"{VERSION}: do not edit.\n\nmessage -> field number -> [JSON name, type, flags]; see "
        'apiserver/protoschema.py."""\n\n'
        f"SCHEMA_JSON = {text!r}  # noqa: E501\n"
    )
    print(f"{OUT}: {len(schema)} messages, {len(text)} bytes")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
