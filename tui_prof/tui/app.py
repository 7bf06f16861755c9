"""The Textual app: a thin face over the core; screens do the work, this wires them."""

from __future__ import annotations

import gc
import time
from pathlib import Path
from typing import TYPE_CHECKING

from textual import work
from textual.app import App
from textual.binding import Binding
from textual.notifications import SeverityLevel
from textual.screen import ModalScreen, Screen
from textual.worker import Worker, WorkerState

from tui_prof.printable import printable
from tui_prof.tui.messages import (
    Captured,
    DiffRequested,
    ExperimentCreated,
    ExperimentNotCreated,
    ProfilesChanged,
    Reattached,
    RunnerEventArrived,
)
from tui_prof.tui.screens.browse import BrowseScreen

if TYPE_CHECKING:
    from textual.command import Provider

    from tui_prof.experiments.events import RunEvent
    from tui_prof.experiments.runner import Runner
    from tui_prof.profiles.prefetch import Prefetch
    from tui_prof.tui.screens.capture_dialog import CaptureRequest
    from tui_prof.tui.screens.captures import CapturesScreen
    from tui_prof.tui.screens.diff import DiffScreen
    from tui_prof.tui.screens.experiments import ExperimentsScreen
    from tui_prof.tui.screens.start_dialog import Prefill, StartRequest


def _commands() -> type[Provider]:
    """The palette's provider, imported when the palette first opens (not before the first frame)."""
    from tui_prof.tui.commands import TuiprofCommands

    return TuiprofCommands


def _freeze_start_up_objects() -> None:
    """Start-up objects (modules, CSS, widgets) live as long as the app: keeping them out of the
    collector's full passes removes ~100 ms pauses while runs stream output. (launch() turned
    collection off while they were made.)"""
    gc.freeze()
    gc.enable()


STOP_WAIT_S = 15.0  # how long quitting waits for stopped runs to end before it leaves anyway


class TuiprofApp(App[int]):
    TITLE = "tuiprof"
    CSS_PATH = "tuiprof.tcss"
    COMMANDS = App.COMMANDS | {_commands}
    BINDINGS = [
        Binding("q", "quit", "Quit", id="quit", tooltip="Quit (asks first while runs are active)"),
        Binding(
            "question_mark", "help", "Help", id="help", key_display="?", tooltip="Keys and numbers"
        ),
        Binding("b", "show('browse')", "Browse", id="browse", tooltip="Profiles of the open path"),
        Binding(
            "e",
            "show('experiments')",
            "Experiments",
            id="experiments",
            tooltip="Runs of repeated experiments, live, and their comparison",
        ),
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
        Binding(
            "c",
            "show('captures')",
            "Captures",
            id="captures",
            show=False,
            tooltip="Profiles captured in this session, one breakdown bar each",
        ),
    ]

    def __init__(
        self, path: Path, prefetch: Prefetch | None = None, peak_tflops: float | None = None
    ) -> None:
        super().__init__()
        self.path = path
        self.prefetch = prefetch
        self.peak_tflops = peak_tflops  # MFU's peak per device (`--peak-tflops`, `T`); None: table
        self.sub_title = str(path)
        self.runners: dict[str, Runner] = {}
        self._reattaching: set[str] = set()
        self.stopping = False  # quitting: the stopped runs are being waited for

    def notify(
        self,
        message: str,
        *,
        title: str = "",
        severity: SeverityLevel = "information",
        timeout: float | None = None,
        markup: bool = True,
    ) -> None:
        """Every notification's text made printable: errors name files, runs and metrics."""
        super().notify(
            printable(message, multiline=True),
            title=printable(title),
            severity=severity,
            timeout=timeout,
            markup=markup,
        )

    def get_default_screen(self) -> Screen[None]:
        """Browse is the first screen itself, not pushed over a blank one: that push styles every
        widget a second time (~0.1 s of the first frame)."""
        browse = BrowseScreen(self.path, self.prefetch)
        self.install_screen(browse, "browse")
        # What push_screen records for a pushed screen; switch_screen pops it. (Textual pinned.)
        browse._push_result_callback(self, None)
        return browse

    def on_mount(self) -> None:
        self.call_after_refresh(_freeze_start_up_objects)

    # -- views: made on first use, so the first frame waits only for the one it shows -----
    @property
    def browse(self) -> BrowseScreen:
        screen = self.get_screen("browse")
        assert isinstance(screen, BrowseScreen)
        return screen

    @property
    def experiments(self) -> ExperimentsScreen:
        from tui_prof.tui.screens.experiments import ExperimentsScreen

        if not self.is_screen_installed("experiments"):
            self.install_screen(ExperimentsScreen(self.path), "experiments")
        screen = self.get_screen("experiments")
        assert isinstance(screen, ExperimentsScreen)
        return screen

    @property
    def captures(self) -> CapturesScreen:
        from tui_prof.tui.screens.captures import CapturesScreen

        if not self.is_screen_installed("captures"):
            self.install_screen(CapturesScreen(), "captures")
        screen = self.get_screen("captures")
        assert isinstance(screen, CapturesScreen)
        return screen

    @property
    def diff(self) -> DiffScreen:
        from tui_prof.tui.screens.diff import DiffScreen

        if not self.is_screen_installed("diff"):
            self.install_screen(DiffScreen(), "diff")
        screen = self.get_screen("diff")
        assert isinstance(screen, DiffScreen)
        return screen

    def view(self, name: str) -> Screen[None]:
        """A view by its name: browse, experiments, captures or diff."""
        if name == "experiments":
            return self.experiments
        if name == "captures":
            return self.captures
        if name == "diff":
            return self.diff
        return self.browse

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        """The key of the view already shown is left out of the footer (it would do nothing)."""
        if action == "show" and parameters:
            name = str(parameters[0])
            return not (self.is_screen_installed(name) and self.screen is self.get_screen(name))
        return True

    def action_show(self, name: str) -> None:
        target = self.view(name)
        if self.screen is not target and not isinstance(self.screen, ModalScreen):
            self.switch_screen(name)

    def action_help(self) -> None:
        from tui_prof.tui.screens.help import HelpScreen

        if not isinstance(self.screen, HelpScreen):
            self.push_screen(HelpScreen())

    # -- failures: one place turns any worker's error into a line on screen ---------------
    def on_worker_state_changed(self, event: Worker.StateChanged) -> None:
        self.worker_changed(event)

    def worker_changed(self, event: Worker.StateChanged) -> None:
        """Screens forward their workers' state here (Textual does not bubble it). The state the
        message carries, not the worker's state now: a worker that failed at once is already in
        ERROR when its earlier messages (pending, running) arrive, and was reported for each."""
        worker = event.worker
        if event.state == WorkerState.ERROR and worker.error is not None:
            self.report_failure(worker.name or "a background task", worker.error)

    def report_failure(self, what: str, error: BaseException) -> None:
        """The error in one line on screen; its traceback in the log file the line names."""
        from tui_prof.tui.errors import log_failure, one_line

        where = log_failure(what, error)
        detail = f"Traceback in {where}" if where else "(the error log could not be written)"
        self.notify(
            f"{one_line(error)}\n{detail}",
            title=f"Failed: {what}",
            severity="error",
            timeout=30,
            markup=False,
        )

    # -- experiments ---------------------------------------------------------------------
    @property
    def active_runs(self) -> int:
        return self.running_runs + self.waiting_runs

    @property
    def running_runs(self) -> int:
        """Runs started (on a cluster: submitted) and not ended yet."""
        return sum(len(r.active) for r in self.runners.values() if not r.done)

    @property
    def waiting_runs(self) -> int:
        """Runs planned in this session that have not started yet."""
        return sum(len(r.pending) for r in self.runners.values() if not r.done)

    def action_start_experiment(self) -> None:
        from tui_prof.tui.screens.start_dialog import StartDialog, default_spec_path

        prefill = self._prefill()
        self.push_screen(StartDialog(default_spec_path(self.path), prefill), self._start)

    def _prefill(self) -> Prefill:
        """The selected profile's run command and the change its advice names, if any."""
        from tui_prof.experiments.suggest import propose, run_context
        from tui_prof.profiles.advice import suggested_changes
        from tui_prof.tui.screens.start_dialog import prefill_from

        session = self.browse.current_session
        ctx = run_context(session.path) if session is not None else None
        summary = self.browse.current_summary
        changes = suggested_changes(summary.recommendations) if summary is not None else ()
        proposals = propose(ctx, changes) if ctx is not None else []
        return prefill_from(ctx, proposals, advised=bool(changes))

    def _start(self, request: StartRequest | None) -> None:
        if request is not None:
            if request.spec.backend.remote:  # connecting imports Ray and asks the cluster: seconds
                self.notify(f"Connecting to the Ray cluster for {request.spec.name}…", markup=False)
            self._create_experiment(request, self.experiments)

    @work(thread=True, name="creating the experiment", exit_on_error=False)
    def _create_experiment(self, request: StartRequest, screen: ExperimentsScreen) -> None:
        """The experiment's directory and store are written here, off the UI thread (and a
        cluster is asked whether it can run it)."""
        from tui_prof.experiments.backends import BackendError
        from tui_prof.experiments.commands import SPEC_FILE, save_spec
        from tui_prof.experiments.runner import Runner
        from tui_prof.experiments.spec import SpecError
        from tui_prof.experiments.store import StoreError

        holder: dict[str, str] = {}

        def on_event(event: RunEvent) -> None:  # on the runner's threads
            screen.post_message(RunnerEventArrived(holder["dir"], event))

        try:
            runner = Runner.create(request.spec, on_event=on_event, parallel=request.parallel)
        except (OSError, StoreError, BackendError, ValueError) as exc:
            self.post_message(ExperimentNotCreated(request.spec.name, str(exc)))
            return
        warning = None
        try:
            save_spec(request.spec, runner.experiment_dir / SPEC_FILE)
        except SpecError as exc:  # the store keeps the spec too: say so and run
            warning = str(exc)
        holder["dir"] = str(runner.experiment_dir)
        self.post_message(ExperimentCreated(holder["dir"], runner, warning))

    def on_experiment_created(self, message: ExperimentCreated) -> None:
        runner = message.runner
        self.runners[message.directory] = runner
        self.action_show("experiments")
        self.experiments.show_experiment(message.directory)
        runner.start()
        self.notify(f"Started {runner.spec.name}: {message.directory}", markup=False)
        if message.warning:
            self.notify(message.warning, severity="warning", markup=False)

    def on_experiment_not_created(self, message: ExperimentNotCreated) -> None:
        self.notify(
            message.error, title=f"Could not start {message.name}", severity="error", markup=False
        )

    def reattach(self, directory: str) -> None:
        """Follow again the runs a cluster still runs for an experiment no tuiprof holds (and
        stop the local runs an earlier tuiprof left running: nothing could record them)."""
        if directory in self.runners or directory in self._reattaching:
            return
        self._reattaching.add(directory)
        self._reattach(directory, self.experiments)

    @work(thread=True, name="reattaching to the cluster", exit_on_error=False)
    def _reattach(self, directory: str, screen: ExperimentsScreen) -> None:
        from tui_prof.experiments.backends import BackendError
        from tui_prof.experiments.runner import Runner
        from tui_prof.experiments.store import StoreError

        def on_event(event: RunEvent) -> None:  # on the runner's threads
            screen.post_message(RunnerEventArrived(directory, event))

        try:
            runner = Runner.resume(directory, on_event=on_event, attach_only=True)
        except StoreError:  # another tuiprof follows it: this view stays read-only
            self.post_message(Reattached(directory, None))
        except BackendError as exc:
            self.post_message(Reattached(directory, None, f"Cannot reattach: {exc}"))
        else:
            self.post_message(Reattached(directory, runner))

    def on_reattached(self, message: Reattached) -> None:
        self._reattaching.discard(message.directory)
        if message.error:
            self.notify(message.error, severity="warning", markup=False)
        runner = message.runner
        if runner is None:
            return
        self.runners[message.directory] = runner
        stopped = runner.store.stopped_orphans
        n = len(runner.pending)
        runner.start()
        if stopped:
            self.notify(
                f"Stopped {len(stopped)} run(s) an earlier tuiprof left running "
                f"({', '.join(stopped)}): recorded as interrupted; "
                f"`tuiprof run --resume {message.directory}` runs them again",
                severity="warning",
                markup=False,
            )
        if n:
            self.notify(
                f"Reattached to {n} run(s) on the cluster: {message.directory}", markup=False
            )

    # -- capture -------------------------------------------------------------------------
    def _capture_defaults(self) -> tuple[str, str]:
        """A running run selected in Experiments: its own profiler port and logdir."""
        from tui_prof.model import RunStatus

        if self.is_screen_installed("experiments") and self.screen is self.experiments:
            run = self.experiments.selected_run
            if run is not None and run.status == RunStatus.RUNNING and run.profiler_port:
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
        screen = self.captures
        self.action_show("captures")
        screen.start(request)

    def on_diff_requested(self, message: DiffRequested) -> None:
        screen = self.diff
        self.action_show("diff")
        screen.compare(message.a, message.b)

    def on_captured(self, message: Captured) -> None:
        if self.is_screen_installed("browse"):  # not while the app is closing
            self.browse.scan()

    def on_profiles_changed(self, message: ProfilesChanged) -> None:
        """An experiment finished: its runs' profiles belong in the browse tree."""
        if not self.is_screen_installed("browse"):  # posted as the app was closing
            return
        browse = self.browse
        for directory in self.runners:
            browse.add_root(Path(directory))
        browse.scan()

    # -- quitting ------------------------------------------------------------------------
    async def action_quit(self) -> None:
        if self.active_runs == 0 or self.stopping:  # q while stopping: leave without waiting
            self.exit(0)
            return
        from tui_prof.tui.screens.quit_dialog import LEAVE, STOP, QuitDialog

        def decided(choice: str | None) -> None:
            if choice == STOP:
                self.stopping = True
                self.notify(
                    f"Stopping {self.running_runs} running run(s) … (q: quit without waiting)",
                    markup=False,
                )
                self._stop_runs_and_exit(list(self.runners.values()))
            elif choice == LEAVE:
                self.exit(0)

        self.push_screen(QuitDialog(self.running_runs, self.waiting_runs), decided)

    @work(thread=True, name="stopping the runs", exit_on_error=False)
    def _stop_runs_and_exit(self, runners: list[Runner]) -> None:
        """Stop every run and wait for them here, not on the UI thread, which keeps drawing."""
        for r in runners:
            r.stop_all()
        deadline = time.monotonic() + STOP_WAIT_S
        for r in runners:
            r.wait(timeout=max(0.0, deadline - time.monotonic()))
        self.call_from_thread(self.exit, 0)
