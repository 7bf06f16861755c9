"""The Browse screen's keys. The footer, the help screen (`?`) and docs/keys.md are all built
from this list, so a key's words are written once, here."""

from __future__ import annotations

from textual.binding import Binding, BindingType

BROWSE_KEYS: list[BindingType] = [
    Binding(
        "f5,ctrl+r",
        "rescan",
        "Rescan",
        id="rescan",
        show=False,  # the tree follows the logdir by itself; the key stays for network mounts
        tooltip="List the logdir again",
    ),
    Binding("tab", "app.focus_next", "Next pane", show=False, tooltip="Tree, tabs, tables in turn"),
    Binding(
        "1",
        "tab('tab-overview')",
        "Overview tab",
        id="tab_overview",
        show=False,
        tooltip="Headline, breakdown bars, averages, precision, advice",
    ),
    Binding("2", "tab('tab-steps')", "Steps tab", id="tab_steps", show=False, tooltip="Per step"),
    Binding(
        "3",
        "tab('tab-ops')",
        "Top ops tab",
        id="tab_ops",
        show=False,
        tooltip="Framework ops by self time",
    ),
    Binding(
        "4",
        "tab('tab-kernels')",
        "Kernels tab",
        id="tab_kernels",
        show=False,
        tooltip="GPU kernels, Tensor Core / Matrix Core use, launch shape",
    ),
    Binding(
        "5",
        "tab('tab-timeline')",
        "Timeline tab",
        id="tab_timeline",
        show=False,
        tooltip="One step's host threads and device streams; the slowest first",
    ),
    Binding(
        "w",
        "toggle_notes",
        "Notes",
        id="notes",
        show=False,
        tooltip="Show the verdict's notes and caveats in full, or fold them to one line",
    ),
    Binding(
        "F",
        "toggle_fallback",
        "Own steps",
        id="fallback",
        tooltip="Ignore official step markers and use tuiprof's own step finder",
    ),
    Binding(
        "P",
        "choose_step_program",
        "Step program",
        id="step_program",
        show=False,
        tooltip="Steps from the runs of an XLA program (JAX): pick which one",
    ),
    Binding(
        "T",
        "set_peak",
        "Peak",
        id="set_peak",
        show=False,
        tooltip="The dense peak TFLOP/s per device MFU divides by (--peak-tflops)",
    ),
    Binding(
        "m",
        "mark_diff",
        "Mark A",
        id="mark_diff",
        tooltip="Mark the selected session as A for a diff (again: unmark)",
    ),
    Binding(
        "d",
        "diff",
        "Diff with A",
        id="diff",
        tooltip="Compare the marked session (A) with the selected one (B), op by op",
    ),
]
