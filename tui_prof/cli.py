"""The `tuiprof` entry point: no subcommand opens the TUI; subcommands are headless.

Each subcommand lives in its own module exposing `register(subparsers)`, which adds its parser
and sets `func(args) -> int`; this module only dispatches, so startup imports almost nothing.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence

# Modules that register headless subcommands, in `--help` order.
COMMAND_MODULES: tuple[str, ...] = ("tui_prof.summary_cli", "tui_prof.run_cli", "tui_prof.compare_cli", "tui_prof.capture_cli")

SUBCOMMANDS: tuple[str, ...] = ("summary", "run", "compare", "capture")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="tuiprof",
        description=(
            "Browse TensorBoard profiles and compare repeated training runs in the terminal. "
            "Without a subcommand, opens the TUI on PATH (default: the current directory)."
        ),
    )
    from tui_prof import __version__

    parser.add_argument("--version", action="version", version=f"tuiprof {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in COMMAND_MODULES:
        importlib.import_module(name).register(sub)
    return parser


def build_tui_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="tuiprof",
        description="Open the TUI on a logdir, run, session or .xplane.pb file.",
        epilog="Headless subcommands: " + ", ".join(SUBCOMMANDS) + " (tuiprof COMMAND --help).",
    )
    parser.add_argument("path", nargs="?", default=".", help="what to browse (default: .)")
    from tui_prof import __version__

    parser.add_argument("--version", action="version", version=f"tuiprof {__version__}")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args_list = list(sys.argv[1:] if argv is None else argv)
    first = next((a for a in args_list if not a.startswith("-")), None)
    if first in SUBCOMMANDS:
        parser = build_parser()
        args = parser.parse_args(args_list)
        if not hasattr(args, "func"):
            parser.error(f"{args.command}: this command is not available in this build")
        try:
            return int(args.func(args))
        except KeyboardInterrupt:
            print("tuiprof: interrupted", file=sys.stderr)
            return 130
    if args_list and args_list[0] in ("-h", "--help"):
        build_tui_parser().print_help()
        print()
        build_parser().print_help()
        return 0
    args = build_tui_parser().parse_args(args_list)
    from tui_prof.tui.launch import launch

    return launch(args.path)


if __name__ == "__main__":
    raise SystemExit(main())
