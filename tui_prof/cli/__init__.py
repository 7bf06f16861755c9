"""The headless face: `tuiprof` and its subcommands (summary, run, compare, capture).

`main.main` dispatches; each subcommand is a module with `register(subparsers)`, imported only
when asked for, so `tuiprof summary` never pays for the runner or the statistics.
"""
