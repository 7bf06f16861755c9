"""Browse: the profile tree on the left, the selected session on the right."""

from __future__ import annotations

import time
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

from rich.text import Text
from textual import on, work
from textual.app import ComposeResult
from textual.containers import Horizontal
from textual.lazy import Lazy
from textual.widgets import Header, Tree
from textual.worker import get_current_worker

from tui_prof.model import ProfileError, ProfileSummary
from tui_prof.profiles.discover import Discovery, HostFile, Session, discover
from tui_prof.tui.messages import (
    DiffRequested,
    LoadProgressed,
    LogdirChanged,
    LogdirScanned,
    ProfileFailed,
    ProfileLoaded,
)
from tui_prof.tui.screens.base import KeysFooter, TuiprofScreen
from tui_prof.tui.screens.browse_keys import BROWSE_KEYS
from tui_prof.tui.widgets.profile_tree import NodeData, ProfileTree
from tui_prof.tui.widgets.session_view import SessionView

if TYPE_CHECKING:
    from tui_prof.profiles.prefetch import Prefetch

# The one worker that lives as long as the screen (tests do not wait for it); it starts a moment
# after the first frame, and reports everything written since the listing began.
FOLLOW_GROUP = "follow"
FOLLOW_AFTER_S = 0.3


def shipped_samples() -> Path | None:
    """sample_traces/ beside the package in a source checkout; a wheel ships none."""
    samples = Path(__file__).resolve().parents[3] / "sample_traces"
    return samples if samples.is_dir() else None


def empty_message(root: Path, samples: Path | None) -> str:
    """What counts as a profile, and where to find one."""
    lines = [
        f"No profiles under {root}.",
        "tuiprof reads TensorFlow and JAX profiles (*.xplane.pb; older TensorBoard tool files "
        "such as *.overview_page.pb) and PyTorch profiler traces (*.pt.trace.json[.gz]).",
        "Open a logdir: tuiprof LOGDIR",
    ]
    if samples is not None:
        try:
            shown = samples.relative_to(Path.cwd())
        except ValueError:
            shown = samples
        lines[-1] += f" — or try the examples that come with tuiprof: tuiprof {shown}"
    return "\n".join(lines)


class BrowseScreen(TuiprofScreen):
    BINDINGS = BROWSE_KEYS

    def __init__(self, root: Path, prefetch: Prefetch | None = None) -> None:
        super().__init__()
        self.root = root
        self.prefetch = prefetch
        self.discovery: Discovery | None = None
        self.force_fallback = False
        self.extra_roots: list[Path] = []  # experiments of this session outside `root`
        self.full = False  # run the converter even on large profiles
        self.step_program: str | None = None  # steps are this XLA program's runs (`P`)
        self._summary: ProfileSummary | None = None  # the shown session's
        self._current: Session | None = None
        self.current_summary: ProfileSummary | None = None  # of the selected session, once read
        self.marked: Session | None = None  # A of the next diff
        self._created = time.time()

    def compose(self) -> ComposeResult:
        yield Header(show_clock=False)
        with Horizontal(id="browse"):
            yield ProfileTree(id="tree")
            yield SessionView(id="session")
        yield Lazy(KeysFooter())  # the keys come a frame after the numbers

    def on_mount(self) -> None:
        pre = self.prefetch
        if pre is not None and pre.listed.is_set() and pre.discovery is not None:
            # Listed (and maybe analysed) while Textual loaded: the first frame shows it.
            pre.listing_used = True
            self.on_logdir_scanned(LogdirScanned(pre.discovery))
        else:
            self.query_one(SessionView).show_message(f"Listing {self.root} …")
            self.scan()
        # Watching starts once the first frame is out (it reports all since the listing began).
        self.set_timer(FOLLOW_AFTER_S, self._follow)

    def _follow(self) -> None:
        """Watch the open directory, so a running job's new sessions appear without a restart."""
        if self.root.is_dir():
            self._follow_worker()

    @work(thread=True, group=FOLLOW_GROUP, name="following the logdir", exit_on_error=False)
    def _follow_worker(self) -> None:
        """Runs until the screen goes: Textual cancels its workers, which sets this event."""
        from tui_prof.live.follow import LogdirFollower

        # Anything written after the listing started is reported, so nothing falls between the two.
        since = self.prefetch.started_at if self.prefetch is not None else self._created
        follower = LogdirFollower(
            self.root, lambda events: self.post_message(LogdirChanged(events)), since=since
        )
        follower.run(get_current_worker().cancelled_event)

    def _shutting_down(self) -> bool:
        """The app is shutting down. Textual closes an installed screen that is not on the stack
        (Browse, while Experiments shows) after its widgets, so a worker's late result would find
        none of them: it has nothing left to show."""
        return not self.app.is_running

    def on_logdir_changed(self, message: LogdirChanged) -> None:
        if self._shutting_down():
            return
        from tui_prof.live.follow import PROFILE, SESSION

        new_sessions = [e.path for e in message.events if e.kind == SESSION]
        if new_sessions:
            names = ", ".join(Text(p.name).plain for p in new_sessions[:3])
            self.notify(f"New profile session: {names}", markup=False)
        if any(e.kind in (SESSION, PROFILE) for e in message.events) or new_sessions:
            self.scan()
        current = self._current
        if current is not None and any(
            e.kind == PROFILE and current.path in (e.path, e.path.parent)  # a trace: its file
            for e in message.events
        ):
            self._current = None
            self.load(current)

    @work(thread=True, exclusive=True, group="scan", name="listing profiles", exit_on_error=False)
    def scan(self) -> None:
        pre = self.prefetch
        if pre is not None and not pre.listing_used:
            pre.listing_used = True
            pre.listed.wait()
            if pre.discovery is not None:
                self.post_message(LogdirScanned(pre.discovery))
                return
        try:
            found = discover(self.root)
        except (FileNotFoundError, PermissionError) as exc:
            found = Discovery(self.root, (), (str(exc),))
        for extra in list(self.extra_roots):
            try:
                more = discover(extra)
            except OSError as exc:
                found = Discovery(found.root, found.runs, (*found.problems, str(exc)))
                continue
            runs = tuple(replace(r, name=f"{extra.name}/{r.name}") for r in more.runs)
            found = Discovery(found.root, found.runs + runs, found.problems + more.problems)
        self.post_message(LogdirScanned(found))

    def add_root(self, directory: Path) -> None:
        """Also list `directory` (an experiment started here that writes outside the open path)."""
        try:
            directory.resolve().relative_to(self.root.resolve())
            inside = True
        except ValueError:
            inside = False
        if not inside and directory not in self.extra_roots:
            self.extra_roots.append(directory)

    def on_logdir_scanned(self, message: LogdirScanned) -> None:
        if self._shutting_down():
            return
        self.discovery = message.discovery
        tree = self.query_one(ProfileTree)
        tree.populate(message.discovery)
        view = self.query_one(SessionView)
        if message.discovery.problems:
            self.notify(
                "\n".join(Text(p).plain for p in message.discovery.problems[:5]),
                title="Some paths could not be read",
                severity="warning",
                markup=False,
            )
        if not message.discovery.sessions:
            view.show_message(empty_message(self.root, shipped_samples()), error=True)
            return
        if self._current is None:  # first scan, or the first sessions of a followed logdir
            node = tree.first_session_node()
            if node is not None:
                # The tree lays out its lines on the next refresh; move the cursor after it.
                tree.move_to_session(node)
                tree.focus()
                if isinstance(node.data, Session):
                    self.load(node.data)

    @on(Tree.NodeHighlighted)
    def _highlighted(self, event: Tree.NodeHighlighted[NodeData]) -> None:
        data = event.node.data
        if isinstance(data, HostFile) and event.node.parent is not None:
            data = event.node.parent.data
        if isinstance(data, Session) and data != self._current:
            self.load(data)

    def load(self, session: Session) -> None:
        self._current = session
        self.current_summary = None
        pre = self.prefetch
        if (
            pre is not None
            and not pre.used
            and pre.session == session
            and pre.analysed.is_set()
            and not self.force_fallback
            and not self.full
            and not self.step_program
        ):
            pre.used = True  # analysed before the first frame: show it without a worker
            if pre.summary is not None:
                self.on_profile_loaded(ProfileLoaded(session, pre.summary, 0.0))
                return
            if pre.error is not None:
                self.on_profile_failed(ProfileFailed(session, pre.error))
                return
        view = self.query_one(SessionView)
        view.show_loading(session.name)
        if pre is not None and not pre.used and pre.session == session and pre.progress:
            view.show_progress(*pre.progress)  # a cold start's step time, in the first frame
        self._analyse(session, self.force_fallback, self.full, self.step_program)

    @work(
        thread=True,
        exclusive=True,
        group="analyse",
        name="analysing the session",
        exit_on_error=False,
    )
    def _analyse(
        self, session: Session, fallback: bool, full: bool, program: str | None = None
    ) -> None:
        """Stops when the worker is cancelled: another session was selected (exclusive), or the
        screen went away."""
        from tui_prof.model import Cancelled
        from tui_prof.profiles.load import load_summary

        cancel = get_current_worker().cancelled_event
        start = time.perf_counter()
        pre = self.prefetch
        if pre is not None and not pre.used and pre.listed.is_set() and pre.session == session:
            pre.used = True  # started before Textual loaded: wait for it rather than redo it
            shown = None
            # The first numbers wait on this; a progress line (the step time, on a cold start)
            # wakes it at once rather than at the next 10 ms tick.
            while not pre.analysed.is_set():
                pre.news.wait(0.01)
                pre.news.clear()
                if cancel.is_set():
                    pre.stop()  # the session was left: its analysis stops with it
                    return
                if pre.progress is not None and pre.progress != shown:
                    shown = pre.progress
                    self.post_message(LoadProgressed(session, *shown))
            plain = not fallback and not full and not program
            if pre.summary is not None and plain:
                self.post_message(ProfileLoaded(session, pre.summary, time.perf_counter() - start))
                return
            if pre.error is not None and plain:
                self.post_message(ProfileFailed(session, pre.error))
                return
        try:
            summary = load_summary(
                session,
                force_fallback=fallback,
                full=full,
                step_program=program,
                cancel=cancel,
                progress=lambda f, m: self.post_message(LoadProgressed(session, f, m)),
            )
        except Cancelled:
            return
        except ProfileError as exc:
            self.post_message(ProfileFailed(session, str(exc)))
            return
        except Exception as exc:  # a bug must not kill the browser; show it like a bad file
            from tui_prof.tui.errors import log_failure, one_line

            where = log_failure(f"analysing {session.path}", exc)
            detail = f" (traceback in {where})" if where else ""
            self.post_message(ProfileFailed(session, f"unexpected error: {one_line(exc)}{detail}"))
            return
        if not cancel.is_set():
            self.post_message(ProfileLoaded(session, summary, time.perf_counter() - start))

    def on_load_progressed(self, message: LoadProgressed) -> None:
        if self._shutting_down():
            return
        if message.session == self._current:
            self.query_one(SessionView).show_progress(message.fraction, message.text)

    def on_profile_loaded(self, message: ProfileLoaded) -> None:
        if self._shutting_down():
            return
        if message.session != self._current:
            return
        self.query_one(ProfileTree).mark(message.session, None)
        self._summary = message.summary  # as read: `T` applies another peak to it
        self._show(message.seconds)

    def _show(self, seconds: float) -> None:
        """The read summary, with MFU against the user's peak where one is set."""
        from tui_prof.profiles.efficiency import with_peak

        if self._summary is None:
            return
        summary = with_peak(self._summary, self.app.peak_tflops)
        self.current_summary = summary
        self.query_one(SessionView).show_summary(summary, seconds)

    def on_profile_failed(self, message: ProfileFailed) -> None:
        if self._shutting_down():
            return
        self.query_one(ProfileTree).mark(message.session, message.error)
        if message.session != self._current:
            return
        self._summary = None
        view = self.query_one(SessionView)
        view.clear_summary()
        view.hide_progress()
        view.show_message(Text(f"{message.session.path}: {message.error}"), error=True)

    def action_rescan(self) -> None:
        self.scan()

    @property
    def current_session(self) -> Session | None:
        """The session shown on the right (selected in the tree)."""
        return self._current

    def action_tab(self, tab: str, tries: int = 60) -> None:
        """Show the tab `tab`. The tabs mount after the first frame: a key pressed before they
        are there, or before their own first activation (of the Overview) lands, was dropped,
        or made its tab active with no pane shown (Steps: an empty table) or with the Overview
        back over it. Until then it waits, 50 ms at a time (3 s at most)."""
        from_tabs = list(self.query("#tabs"))
        if not from_tabs or not getattr(from_tabs[0], "active", ""):
            if tries > 0:
                self.set_timer(0.05, lambda: self.action_tab(tab, tries - 1))
            return
        from textual.widgets import TabbedContent

        for tabs in self.query("#tabs").results(TabbedContent):
            tabs.active = tab

    def action_toggle_full(self) -> None:
        self.full = not self.full
        self.notify(
            "Large profiles: TensorBoard's converter too (op and kernel tables; slow, memory-hungry)"
            if self.full
            else "Large profiles: tuiprof's streaming reader"
        )
        if self._current is not None:
            current, self._current = self._current, None
            self.load(current)

    def action_toggle_notes(self) -> None:
        self.query_one(SessionView).toggle_notes()

    def action_toggle_fallback(self) -> None:
        self.force_fallback = not self.force_fallback
        self.notify(
            "Steps: tuiprof's own step finder"
            if self.force_fallback
            else "Steps: official markers where present"
        )
        if self._current is not None:
            current, self._current = self._current, None
            self.load(current)

    def action_choose_step_program(self) -> None:
        from tui_prof.tui.screens.program_dialog import AUTOMATIC, ProgramDialog

        summary = self._summary
        programs = summary.programs if summary is not None else ()
        note = (
            "TPU device events carry no launch ids: runs cannot be split into steps here; "
            "mark the steps with jax.profiler.StepTraceAnnotation."
            if summary is not None and "TPU" in summary.environment.device_type
            else None
        )

        def chosen(name: str | None) -> None:
            if name is None:
                return
            self.step_program = name if name != AUTOMATIC else None
            self.notify(
                f"Steps: runs of the XLA program {name}"
                if self.step_program
                else "Steps: official markers, else tuiprof's own step finder",
                markup=False,
            )
            if self._current is not None:
                current, self._current = self._current, None
                self.load(current)

        self.app.push_screen(ProgramDialog(programs, self.step_program, note), chosen)

    def action_set_peak(self) -> None:
        from tui_prof.tui.screens.peak_dialog import PeakChoice, PeakDialog

        def chosen(choice: PeakChoice | None) -> None:
            if choice is None or choice.tflops == self.app.peak_tflops:
                return
            self.app.peak_tflops = choice.tflops
            self.notify(
                f"MFU against {choice.tflops:,.4g} TFLOP/s per device"
                if choice.tflops is not None
                else "MFU against the hardware table's peak"
            )
            if self.current_summary is not None:  # else the session being read gets it
                self._show(0.0)

        shown = self.current_summary
        e = self._summary.efficiency if shown is not None and self._summary is not None else None
        self.app.push_screen(PeakDialog(self.app.peak_tflops, e), chosen)

    # -- diff ----------------------------------------------------------------------------
    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action == "diff":  # in the footer only once there is an A to compare with
            return self.marked is not None
        return True

    def action_mark_diff(self) -> None:
        current = self._current
        tree = self.query_one(ProfileTree)
        if current is None:
            self.notify("Select a session to mark.", severity="warning")
            return
        self.marked = None if self.marked == current else current
        tree.set_marked(self.marked)
        self.refresh_bindings()
        if self.marked is not None:
            self.notify(
                f"A: {current.run}/{current.name}. Select another session and press d.",
                markup=False,
            )

    def action_diff(self) -> None:
        current = self._current
        if self.marked is None:
            self.notify("Press m on a session first to mark it as A.", severity="warning")
            return
        if current is None or current == self.marked:
            self.notify("Select a different session (B) to compare with A.", severity="warning")
            return
        self.post_message(DiffRequested(self.marked, current))
