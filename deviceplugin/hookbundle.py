"""`kubenode cdi-hook install DIR`: copy everything the CDI hook needs into DIR, for a host without Python.

The runtime runs the hook on the host, where a node may have no Python and no kubenode. The DaemonSet's init
container runs this with DIR a hostPath (/opt/kubenode/cdi-hook, mounted at the same path), and the plugin
names DIR as its `cdiHookPath` (deviceplugin.hookcommand). Flow:

1. The interpreter running this (the image's) and the shared libraries `ldd` lists for it and for the
   one extension module the hook loads (`_json`, unless built in), the dynamic loader included: lib/.
2. The few stdlib files an `-I -S` start reads: the `os.py` landmark by which the interpreter finds its
   prefix (os itself is frozen), `encodings` with UTF-8 and ASCII, and `_json`: python/lib/python3.X/.
3. The hook's modules (deviceplugin.cdihook, kubenode.cpuset, their packages' __init__) with their
   bytecode: pkg/.
4. hook.json, written last: the hook's command, `lib/<loader> --library-path lib python/bin/python3.X
   -I -S -c BOOTSTRAP pkg`. Started through the copied loader with the copied libc, it needs nothing on
   the host (not even a glibc of the same version); -I -S keeps the host's environment and site out.

Every file is written beside its target and renamed over it, so a hook starting during an upgrade sees
whole files; files already equal are left alone. Nothing outside DIR is touched.
"""

from __future__ import annotations

import argparse
import json
import os
import py_compile
import subprocess
import sys
import sysconfig
from collections.abc import Sequence
from importlib.util import cache_from_source
from pathlib import Path

from deviceplugin.hookcommand import BUNDLE_FILE, HookCommand, isolated_argv, package_root

PROG = "kubenode cdi-hook install"
STDLIB_FILES = (
    "os.py",
    "encodings/__init__.py",
    "encodings/aliases.py",
    "encodings/utf_8.py",
    "encodings/ascii.py",
)
# What the hook imports of kubenode, relative to the package root (deviceplugin.cdihook's docstring).
HOOK_MODULES = (
    "deviceplugin/__init__.py",
    "deviceplugin/cdihook.py",
    "kubenode/__init__.py",
    "kubenode/cpuset.py",
)


class BundleError(RuntimeError):
    pass


def main(argv: Sequence[str]) -> int:
    parser = argparse.ArgumentParser(
        prog=PROG,
        description="Copy the CDI cpuset hook with its own interpreter into DIR (a host path) and print "
        "the command a CDI spec runs it with. The plugin's cdiHookPath names DIR.",
    )
    parser.add_argument(
        "dir", metavar="DIR", help="absolute path, the same inside the container and on the host"
    )
    args = parser.parse_args(argv)
    if not os.path.isabs(args.dir):
        print(f"{PROG}: DIR {args.dir!r} must be an absolute path (CDI runs hooks by path)", file=sys.stderr)
        return 2
    try:
        command = install(Path(args.dir))
    except (BundleError, OSError) as exc:
        print(f"{PROG}: {exc}", file=sys.stderr)
        return 1
    print(json.dumps({"path": command.path, "args": list(command.args)}))
    return 0


def install(directory: Path) -> HookCommand:
    interpreter = Path(os.path.realpath(sys.executable))
    version = f"python{sys.version_info.major}.{sys.version_info.minor}"
    stdlib = Path(sysconfig.get_paths()["stdlib"])
    lib, home = directory / "lib", directory / "python"
    bundled_python = home / "bin" / version
    bundled_stdlib = home / "lib" / version
    _copy(interpreter, bundled_python, mode=0o755)
    binaries = [interpreter]
    if "_json" not in sys.builtin_module_names:
        import _json

        extension = Path(_json.__file__)
        binaries.append(extension)
        _copy(extension, bundled_stdlib / "lib-dynload" / extension.name, mode=0o644)
    loader: Path | None = None
    for name, source, is_loader in shared_libraries(binaries):
        _copy(source, lib / name, mode=0o755)
        if is_loader:
            loader = lib / name
    if loader is None:
        raise BundleError(
            f"ldd names no dynamic loader for {interpreter}: a static interpreter is not supported"
        )
    sources = [(stdlib / relative, bundled_stdlib / relative) for relative in STDLIB_FILES]
    sources += [(Path(package_root()) / relative, directory / "pkg" / relative) for relative in HOOK_MODULES]
    for source, target in sources:
        _copy(source, target, mode=0o644)
        # Its bytecode where the interpreter looks for it: without it each start would compile the file.
        _write(Path(cache_from_source(str(target))), _bytecode(target, directory), mode=0o644)
    argv = isolated_argv(str(bundled_python), str(directory / "pkg"))
    command = HookCommand(str(loader), ("kubenode-cdi-hook", "--library-path", str(lib), *argv))
    spec = json.dumps({"path": command.path, "args": list(command.args)}, indent=2) + "\n"
    _write(directory / BUNDLE_FILE, spec.encode(), mode=0o644)
    return command


def shared_libraries(binaries: Sequence[Path]) -> list[tuple[str, Path, bool]]:
    """(file name in lib/, the file, whether it is the loader) for what `ldd` lists for each binary."""
    found: dict[str, tuple[Path, bool]] = {}
    for binary in binaries:
        try:
            result = subprocess.run(["ldd", str(binary)], capture_output=True, text=True, check=False)
        except FileNotFoundError:
            raise BundleError(
                "ldd not found (Debian: libc-bin): cannot list the interpreter's libraries"
            ) from None
        if result.returncode != 0:
            if "not a dynamic executable" in result.stdout + result.stderr:
                continue  # a static extension needs nothing more
            raise BundleError(f"ldd {binary} failed: {result.stderr.strip() or result.stdout.strip()}")
        for line in result.stdout.splitlines():
            words = line.split()
            if "=>" in words:  # libz.so.1 => /lib/x86_64-linux-gnu/libz.so.1 (0x...)
                name, arrow = words[0], words.index("=>")
                if len(words) <= arrow + 1 or not words[arrow + 1].startswith("/"):
                    if "not found" in line:
                        raise BundleError(f"{binary}: {line.strip()}")
                    continue
                found.setdefault(name, (Path(words[arrow + 1]), False))
            elif words and words[0].startswith("/"):  # the loader: /lib64/ld-linux-x86-64.so.2 (0x...)
                path = Path(words[0])
                found.setdefault(path.name, (path, True))
    return [(name, path, is_loader) for name, (path, is_loader) in sorted(found.items())]


def _bytecode(source: Path, scratch: Path) -> bytes:
    """`source` compiled by this interpreter, validated against the file as it is now (mtime and size).

    Compiled through a file in `scratch` (the bundle): the init container's root filesystem is read-only.
    """
    target = scratch / f".compile.{os.getpid()}.pyc"
    try:
        py_compile.compile(str(source), cfile=str(target), doraise=True)
        return target.read_bytes()
    finally:
        target.unlink(missing_ok=True)


def _copy(source: Path, target: Path, mode: int) -> None:
    try:
        data = source.read_bytes()  # follows links: libc.so.6 -> libc-2.36.so lands as libc.so.6
    except OSError as exc:
        raise BundleError(f"cannot read {source}: {exc.strerror}") from None
    _write(target, data, mode, keep_mtime_of=source)


def _write(target: Path, data: bytes, mode: int, keep_mtime_of: Path | None = None) -> None:
    target.parent.mkdir(parents=True, exist_ok=True)
    try:
        if target.read_bytes() == data:
            return  # unchanged: a stdlib source keeps the mtime its bytecode was checked against
    except OSError:
        pass
    temporary = target.with_name(f".{target.name}.{os.getpid()}.tmp")
    try:
        with open(temporary, "wb") as out:
            out.write(data)
        os.chmod(temporary, mode)
        if keep_mtime_of is not None:
            stat = keep_mtime_of.stat()
            os.utime(temporary, ns=(stat.st_atime_ns, stat.st_mtime_ns))
        os.replace(temporary, target)
    except BaseException:
        temporary.unlink(missing_ok=True)
        raise
