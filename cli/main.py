"""The `kubenode` command: one entry point, one subcommand per part of the product.

Each part owns a small `cli` module with `register(subparsers)`, which only adds
its argparse parser; heavy imports happen inside the command's handler, so
`kubenode deviceplugin` never pays for the scheduler's imports and vice versa.

Conventions every subcommand gets from here, as kubectl users expect:
- global flags (`--log-level`) are accepted anywhere on the line, before `--`;
- `--log-level` is case-insensitive (`debug` = `DEBUG`);
- every `--output` option also answers to `-o`;
- a mistyped flag is reported as itself (`unknown flag --confg; did you mean --config?`), not as
  whatever argparse tried to read the next word as (an "invalid choice" of a subcommand);
- `kubenode --version` prints the version that the daemons also put in their startup line.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Iterator, Sequence
from typing import NoReturn

from kubenode import __version__

# Modules that contribute subcommands, in the order `kubenode --help` lists them.
COMMAND_MODULES: tuple[str, ...] = (
    "cli.up",
    "cli.trace",
    "deviceplugin.cli",
    "agent.cli",
    "conformance.cli",
    "scheduler.cli",
    "controllers.cli",
    "apiserver.cli",
)

LOG_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR")
# Global flags that take a value and may appear anywhere; they are moved in front of the subcommand.
GLOBAL_VALUE_FLAGS = ("--log-level",)


class UsageError(Exception):
    """A command line argparse refused; main() decides how to word it (see _usage_error)."""

    def __init__(self, parser: argparse.ArgumentParser, message: str) -> None:
        super().__init__(message)
        self.parser = parser
        self.message = message


class KubenodeArgumentParser(argparse.ArgumentParser):
    """Raises UsageError instead of printing and exiting, so that main() can name a mistyped flag.

    Subparsers made with add_subparsers() are of the parent's class, so every level raises."""

    def error(self, message: str) -> NoReturn:
        raise UsageError(self, message)


def build_parser() -> argparse.ArgumentParser:
    parser = KubenodeArgumentParser(
        prog="kubenode",
        description="Exact CPU and GPU allocation: device plugins, a node agent and a scheduler.",
    )
    parser.add_argument("--version", action="version", version=f"kubenode {__version__}")
    parser.add_argument(
        "--log-level",
        default="INFO",
        type=str.upper,
        choices=LOG_LEVELS,
        help="logging level, any case; accepted anywhere on the line",
    )
    subparsers = parser.add_subparsers(dest="command", metavar="<command>", required=True)
    for module_name in COMMAND_MODULES:
        importlib.import_module(module_name).register(subparsers)
    for sub in _parsers(parser):
        _add_short_output_flag(sub)
    return parser


def _parsers(parser: argparse.ArgumentParser) -> Iterator[argparse.ArgumentParser]:
    """The parser and every subcommand parser under it."""
    yield parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub in dict.fromkeys(action.choices.values()):  # aliases map to the same parser
                yield from _parsers(sub)


def _add_short_output_flag(parser: argparse.ArgumentParser) -> None:
    """kubectl's `-o` for every `--output`, without each part's cli having to remember it."""
    action = parser._option_string_actions.get("--output")
    if action is not None and "-o" not in parser._option_string_actions:
        action.option_strings = ["-o", *action.option_strings]
        parser._option_string_actions["-o"] = action


def hoist_global_flags(argv: Sequence[str]) -> list[str]:
    """Moves `--log-level X` / `--log-level=X` found anywhere (before `--`) to the front."""
    hoisted: list[str] = []
    rest: list[str] = []
    i = 0
    while i < len(argv):
        token = argv[i]
        if token == "--":
            rest.extend(argv[i:])
            break
        name = token.split("=", 1)[0]
        if name in GLOBAL_VALUE_FLAGS:
            if "=" in token:
                hoisted.append(token)
            else:
                hoisted.extend(argv[i : i + 2])
                i += 1
        else:
            rest.append(token)
        i += 1
    return hoisted + rest


def unknown_flag(parser: argparse.ArgumentParser, argv: Sequence[str]) -> str | None:
    """The first `-x`/`--xyz` on the line that no kubenode (sub)command knows, with a suggestion."""
    known = {option for sub in _parsers(parser) for option in sub._option_string_actions}
    for token in argv:
        if token == "--":
            break
        name = token.split("=", 1)[0]
        if not name.startswith("-") or name == "-" or name in known or _is_number(name):
            continue
        import difflib  # only on a mistyped flag; kept off the start path (the cdi-hook runs per container)

        close = difflib.get_close_matches(name, sorted(o for o in known if o.startswith("--")), n=1)
        return f"unknown flag {name}" + (f"; did you mean {close[0]}?" if close else "")
    return None


def _is_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def main(argv: Sequence[str] | None = None) -> int:
    words = sys.argv[1:] if argv is None else list(argv)
    if words[:2] == ["cdi-hook", "install"]:
        # The DaemonSet's init container: the hook with its own interpreter onto the host (hookbundle.py).
        from deviceplugin.hookbundle import main as install_hook

        return install_hook(words[2:])
    if words[:1] == ["cdi-hook"]:
        # The OCI hook runs on every container start (<= 50 ms): it skips the parser, which imports every
        # command module. `kubenode cdi-hook cpuset --cpus LIST`, see deviceplugin/cdihook.py.
        from deviceplugin.cdihook import main as cdi_hook

        return cdi_hook(words[1:])
    argv = hoist_global_flags(words)
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except UsageError as exc:
        # A mistyped flag makes argparse misread the words after it; name the flag itself instead.
        # One line, like every other kubenode error; the usage text is one --help away.
        message = unknown_flag(parser, argv) or exc.message
        print(f"{exc.parser.prog}: error: {message} (see: {exc.parser.prog} --help)", file=sys.stderr)
        return 2
    import logging  # here, not at the top: `kubenode cdi-hook` returns before this and must start fast

    logging.basicConfig(
        level=getattr(logging, args.log_level),
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
        stream=sys.stderr,
    )
    try:
        result: int = args.func(args)
    except KeyboardInterrupt:
        return 130
    return result


if __name__ == "__main__":
    sys.exit(main())
