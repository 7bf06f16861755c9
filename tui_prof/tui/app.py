"""The Textual app: a thin face over the core; screens do the work, this wires them."""

from __future__ import annotations

import gc
import threading
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from textual.app import App
from textual.binding import Binding
from textual.screen import ModalScreen, Screen

from tui_prof.tui.commands import TuiprofCommands
from tui_prof.tui.messages import Captured, DiffRequested, ProfilesChanged, RunnerEventArrived
from tui_prof.tui.screens.browse import BrowseScreen

if TYPE_CHECKING:
    from tui_prof.experiments.events import RunEvent
    from tui_prof.experiments.runner import Runner
    from tui_prof.profiles.prefetch import Prefetch
    from tui_prof.tui.screens.capture_dialog import CaptureRequest
    from tui_prof.tui.screens.start_dialog import Prefill, StartRequest


class TuiprofApp(App[int]):
    TITLE = "tuiprof"
    CSS_PATH = "tuiprof.tcss"
    COMMANDS = App.COMMANDS | {TuiprofCommands}
    BINDINGS = [
        Binding("q", "quit", "Quit", id="quit"),
        Binding("question_mark", "help", "Help", id="help", key_display="?"),
        Binding("b", "show('browse')", "Browse", id="browse"),
        Binding("e", "show('experiments')", "Experiments", id="experiments"),
        Binding(
            "r",
            "start_experiment",
            "Run experiment",
            id="run_experiment",
            tooltip="Start a repeated experiment (variants × repeats)",
        ),
        Binding(
            "a",
            "capture",
            "Capture",
            id="capture",
            tooltip="Capture a profile from a running job's profiler server",
        ),
        Binding("c", "show('captures')", "Captures", id="captures", show=False),
    ]

    def __init__(self, path: Path, prefetch: Prefetch | None = None) -> None:
        super().__init__()
        self.path = path
        self.prefetch = prefetch
        self.sub_title = str(path)
        self.runners: dict[str, Runner] = {}
        self._reattaching: set[str] = set()

    def on_mount(self) -> None:
        self.install_screen(BrowseScreen(self.path, self.prefetch), "browse")
        self.push_screen("browse")
        # Start-up objects (modules, CSS, widgets) live as long as the app: keeping them out of
        # the collector's full passes removes ~100 ms pauses while runs stream output.
        self.call_after_refresh(gc.freeze)

    def view(self, name: str) -> Screen[None]:
        """A named view, made on first use: the first frame should not wait for views not shown."""
        if not self.is_screen_installed(name):
            if name == "experiments":
                from tui_prof.tui.screens.experiments import ExperimentsScreen

                self.install_screen(ExperimentsScreen(self.path), name)
            elif name == "captures":
                from tui_prof.tui.screens.captures import CapturesScreen

                self.install_screen(CapturesScreen(), name)
            elif name == "diff":
                from tui_prof.tui.screens.diff import DiffScreen

                self.install_screen(DiffScreen(), name)
        return self.get_screen(name)

    def on_resize(self) -> None:
        self.screen.set_class(self.size.width < 100, "narrow")

    def action_show(self, name: str) -> None:
        target = self.view(name)
        if self.screen is not target and not isinstance(self.screen, ModalScreen):
            self.switch_screen(name)
            self.screen.set_class(self.size.width < 100, "narrow")

    def action_help(self) -> None:
        from tui_prof.tui.screens.help import HelpScreen  # Markdown costs ~150 ms to import

        if not isinstance(self.screen, HelpScreen):
            self.push_screen(HelpScreen())

    # -- experiments ---------------------------------------------------------------------
    @property
    def active_runs(self) -> int:
        return sum(len(r.active) + len(r.pending) for r in self.runners.values() if not r.done)

    def action_start_experiment(self) -> None:
        from tui_prof.tui.screens.start_dialog import StartDialog, default_spec_path

        prefill = self._prefill()
        self.push_screen(StartDialog(default_spec_path(self.path), prefill), self._start)

    def _prefill(self) -> Prefill:
        """The selected profile's run command and the change its advice names, if any."""
        from tui_prof.experiments.suggest import propose, run_context
        from tui_prof.profiles.advice import suggested_changes
        from tui_prof.tui.screens.start_dialog import prefill_from

        browse = self.get_screen("browse")
        session = getattr(browse, "current_session", None)
        ctx = run_context(session.path) if session is not None else None
        summary = getattr(browse, "current_summary", None)
        changes = suggested_changes(summary.recommendations) if summary is not None else ()
        proposals = propose(ctx, changes) if ctx is not None else []
        return prefill_from(ctx, proposals, advised=bool(changes))

    def _start(self, request: StartRequest | None) -> None:
        if request is None:
            return
        if request.spec.backend.remote:  # connecting imports Ray and asks the cluster: seconds
            self.notify(f"Connecting to the Ray cluster for {request.spec.name}…", markup=False)
            self.run_worker(lambda: self._create(request), thread=True, group="start")
        else:
            self._create(request)

    def _on_event(self, holder: dict[str, str]) -> Callable[[RunEvent], None]:
        screen = self.view("experiments")

        def on_event(event: RunEvent) -> None:
            screen.post_message(RunnerEventArrived(holder["dir"], event))

        return on_event

    def _create(self, request: StartRequest) -> None:
        """Make the experiment and its runner (on a worker thread for a cluster)."""
        from tui_prof.experiments.backends import BackendError
        from tui_prof.experiments.runner import Runner
        from tui_prof.experiments.store import StoreError

        holder: dict[str, str] = {}
        try:
            runner = Runner.create(
                request.spec, on_event=self._on_event(holder), parallel=request.parallel
            )
        except (StoreError, BackendError, OSError) as exc:
            self._call(self.notify, str(exc), severity="error", markup=False)
            return
        holder["dir"] = str(runner.experiment_dir)
        self._call(self._started, runner, request)

    def _call(self, fn: Callable[..., object], *args: object, **kwargs: object) -> None:
        """fn on the UI thread, from it or from a worker thread."""
        if threading.get_ident() == self._thread_id:
            fn(*args, **kwargs)
        else:
            self.call_from_thread(fn, *args, **kwargs)

    def _started(self, runner: Runner, request: StartRequest) -> None:
        from tui_prof.experiments.commands import SPEC_FILE, save_spec
        from tui_prof.experiments.spec import SpecError

        try:
            save_spec(request.spec, runner.experiment_dir / SPEC_FILE)
        except SpecError as exc:  # the store keeps the spec too: say so and run
            self.notify(str(exc), severity="warning", markup=False)
        directory = str(runner.experiment_dir)
        self.runners[directory] = runner
        screen = self.view("experiments")
        self.action_show("experiments")
        screen.show_experiment(directory)  # type: ignore[attr-defined]
        runner.start()
        self.notify(f"Started {request.spec.name}: {directory}", markup=False)

    def reattach(self, directory: str) -> None:
        """Follow again the runs a cluster still runs for an experiment no tuiprof holds."""
        if directory in self.runners or directory in self._reattaching:
            return
        self._reattaching.add(directory)
        self.run_worker(lambda: self._reattach(directory), thread=True, group="reattach")

    def _reattach(self, directory: str) -> None:
        from tui_prof.experiments.backends import BackendError
        from tui_prof.experiments.runner import Runner
        from tui_prof.experiments.store import StoreError

        holder = {"dir": directory}
        try:
            runner = Runner.resume(directory, on_event=self._on_event(holder), attach_only=True)
        except StoreError:  # another tuiprof follows it: this view stays read-only
            return
        except BackendError as exc:
            self._call(self.notify, f"Cannot reattach: {exc}", severity="warning", markup=False)
            return
        finally:
            self._reattaching.discard(directory)

        def adopt() -> None:
            self.runners[directory] = runner
            runner.start()
            n = len(runner.pending)
            self.notify(f"Reattached to {n} run(s) on the cluster: {directory}", markup=False)

        self._call(adopt)

    # -- capture -------------------------------------------------------------------------
    def _capture_defaults(self) -> tuple[str, str]:
        """A running run selected in Experiments: its own profiler port and logdir."""
        from tui_prof.model import RUN_RUNNING
        from tui_prof.tui.widgets.run_table import RunTable

        if self.is_screen_installed("experiments") and self.screen is self.get_screen(
            "experiments"
        ):
            run = self.screen.query_one(RunTable).selected_run
            if run is not None and run.status == RUN_RUNNING and run.profiler_port:
                return f"localhost:{run.profiler_port}", run.run_dir
        base = self.path if self.path.is_dir() else self.path.parent
        return "localhost:6009", str(base)

    def action_capture(self) -> None:
        from tui_prof.tui.screens.capture_dialog import CaptureDialog

        address, logdir = self._capture_defaults()
        self.push_screen(CaptureDialog(address, logdir), self._capture)

    def _capture(self, request: CaptureRequest | None) -> None:
        if request is None:
            return
        screen = self.view("captures")
        self.action_show("captures")
        screen.start(request)  # type: ignore[attr-defined]

    def on_diff_requested(self, message: DiffRequested) -> None:
        from tui_prof.tui.screens.diff import DiffScreen

        screen = self.view("diff")
        self.action_show("diff")
        if isinstance(screen, DiffScreen):
            screen.compare(message.a, message.b)

    def on_captured(self, message: Captured) -> None:
        self.get_screen("browse").scan()  # type: ignore[attr-defined]

    def on_profiles_changed(self, message: ProfilesChanged) -> None:
        """An experiment finished: its runs' profiles belong in the browse tree."""
        browse = self.get_screen("browse")
        for directory in self.runners:
            browse.add_root(Path(directory))  # type: ignore[attr-defined]
        browse.scan()  # type: ignore[attr-defined]

    async def action_quit(self) -> None:
        if self.active_runs == 0:
            self.exit(0)
            return
        from tui_prof.tui.screens.quit_dialog import LEAVE, STOP, QuitDialog

        def decided(choice: str | None) -> None:
            if choice == STOP:
                for r in self.runners.values():
                    r.stop_all()
                for r in self.runners.values():
                    r.wait(timeout=15)
                self.exit(0)
            elif choice == LEAVE:
                self.exit(0)

        self.push_screen(QuitDialog(self.active_runs), decided)
