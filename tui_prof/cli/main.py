"""The `tuiprof` entry point: no subcommand opens the TUI; subcommands are headless.

Each subcommand lives in its own module exposing `register(subparsers)`, which adds its parser
and sets `func(args) -> int`; this module only dispatches, so startup imports almost nothing.
"""

from __future__ import annotations

import argparse
import atexit
import importlib
import os
import sys
from collections.abc import Sequence
from typing import NoReturn

# Subcommand → the module that registers it, in `--help` order. Only the module of the command
# asked for is imported: `tuiprof summary` must not pay for numpy (compare) or the runner.
COMMANDS: dict[str, str] = {
    "summary": "tui_prof.cli.summary",
    "run": "tui_prof.cli.run",
    "compare": "tui_prof.cli.compare",
    "capture": "tui_prof.cli.capture",
    "diff": "tui_prof.cli.diff",
    "timeline": "tui_prof.cli.timeline",
}
SUBCOMMANDS: tuple[str, ...] = tuple(COMMANDS)
# Commands whose process ends as soon as their output is out (see `_exit_now`): nothing they
# start outlives them but what atexit handlers stop.
EXIT_NOW = frozenset({"summary"})


def build_parser(only: str | None = None) -> argparse.ArgumentParser:
    """The headless parser; with `only`, just that subcommand's module is imported."""
    parser = argparse.ArgumentParser(
        prog="tuiprof",
        description=(
            "Browse TensorBoard profiles and compare repeated training runs in the terminal. "
            "Without a subcommand, opens the TUI on PATH (default: the current directory): a "
            "logdir, run, session, .xplane.pb file or PyTorch profiler trace (.json[.gz])."
        ),
        epilog="tuiprof COMMAND --help shows a command's options.",
    )
    from tui_prof import __version__

    parser.add_argument("--version", action="version", version=f"tuiprof {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name, module in COMMANDS.items():
        if only is None or name == only:
            importlib.import_module(module).register(sub)
    return parser


def build_tui_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="tuiprof",
        description="Open the TUI on a logdir, run, session, .xplane.pb file or PyTorch profiler "
        "trace (.json[.gz]).",
        epilog="Headless subcommands: " + ", ".join(SUBCOMMANDS) + " (tuiprof COMMAND --help).",
    )
    parser.add_argument("path", nargs="?", default=".", help="what to browse (default: .)")
    from tui_prof import __version__
    from tui_prof.cli.summary import add_peak_argument

    parser.add_argument("--version", action="version", version=f"tuiprof {__version__}")
    add_peak_argument(parser)  # `T` in the TUI changes it
    return parser


def _exit_now(code: int) -> NoReturn:
    """End the process once its output is flushed and its atexit handlers have run (the
    converter's processes reaped), without tearing down every module and object one by one:
    that took ~20 ms of a ~0.25 s `tuiprof summary`."""
    sys.stderr.flush()
    atexit._run_exitfuncs()
    os._exit(code)


def main(argv: Sequence[str] | None = None) -> int:
    args_list = list(sys.argv[1:] if argv is None else argv)
    first = next((a for a in args_list if not a.startswith("-")), None)
    if first in SUBCOMMANDS:
        if first == "summary" and not {"-h", "--help"} & set(args_list):
            # TensorBoard's converter's process starts first: its import overlaps the parsing
            # and the listing (`summary` stops it where no session needs it).
            from tui_prof.profiles.xplane import convert_worker

            convert_worker.process().start()
        parser = build_parser(only=first)
        args = parser.parse_args(args_list)
        if not hasattr(args, "func"):
            parser.error(f"{args.command}: this command is not available in this build")
        try:
            code = int(args.func(args))
            if argv is None and first in EXIT_NOW:  # a program's run, not a call from Python
                sys.stdout.flush()
                _exit_now(code)
            return code
        except KeyboardInterrupt:
            print("tuiprof: interrupted", file=sys.stderr)
            return 130
        except BrokenPipeError:
            # The reader went away (`tuiprof summary --json | head`): stop quietly with status 1,
            # as Rich does for the table outputs; stdout goes to /dev/null so the exit's flush
            # cannot fail again.
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
            return 1
    if args_list and args_list[0] in ("-h", "--help"):
        parser = build_parser()
        # One usage block for both ways in: the TUI on PATH, or a headless command. (Set here
        # only: subcommands' usage lines are built from the parent's.)
        parser.usage = (
            "%(prog)s [-h] [--version] [--peak-tflops TFLOPS] [PATH]\n"
            "       %(prog)s COMMAND [-h] ..."
        )
        from tui_prof.cli.summary import add_peak_argument

        add_peak_argument(parser)  # the TUI's option, listed here (T changes it in the TUI)
        parser.print_help()
        return 0
    args = build_tui_parser().parse_args(args_list)
    from tui_prof.tui.launch import launch

    return launch(args.path, args.peak_tflops)


if __name__ == "__main__":
    raise SystemExit(main())
