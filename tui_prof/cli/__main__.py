"""`python -m tui_prof.cli`: the same entry point as the `tuiprof` script."""

from tui_prof.cli.main import main

raise SystemExit(main())
