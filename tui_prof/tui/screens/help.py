"""The `?` help: the key tables are built from the bindings themselves, so they cannot drift."""

from __future__ import annotations

from collections.abc import Iterable

from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import VerticalScroll
from textual.keys import format_key
from textual.screen import ModalScreen
from textual.widgets import Markdown

INTRO = """\
# tuiprof

Browse TensorFlow and JAX profiles (`*.xplane.pb`; older `*.overview_page.pb` too) and PyTorch
profiler traces (`*.pt.trace.json[.gz]`, other Kineto JSON) offline: runs → sessions → hosts
(ranks) on the left, the selected session on the right. The tree follows the logdir: sessions a
running job writes appear within a second or two (`f5` lists new PyTorch traces).

**Experiments** (`e`): runs of repeated experiments, live, with the selected run's log and the
comparison: the speed/quality trade-off (medians, quartiles, worst run, Pareto front, scatter),
statistics, confidence intervals (paired by repeat where every repeat has a run of each variant),
how many repeats would resolve an open question, and box plots. **Captures** (`c`): profiles
captured from running jobs with `a`, one breakdown bar per capture. **Diff**: `m` marks a session
as A, `d` compares it with the selected one (B). The footer shows the keys that apply where you
are; the tables below list every key of every view.
"""

NUMBERS = """\
## What the numbers mean
- **Step time** and the **breakdown** use TensorBoard's categories: device compute, device to
  device, device collectives, host compute, kernel launch, input, output, compilation, all others.
  Where TensorBoard's converter finds steps, these are its numbers. Where it finds none
  ("No step marker observed"), tuiprof finds the steps in the raw events and says how.
- **JAX / XLA** without step markers: a step is one run of the jitted train-step program (the
  one with the most device time, or the one picked with `P`); the "Steps:" line names it.
- **No steps**: no empty table, but each device's busy share of the profile, the XLA programs run
  and how to mark steps. Older TensorBoard files (`*.overview_page.pb`) show the steps TensorBoard
  saved then ("precomputed").
- **Verdict**: the category that dominates the average step, with its share and time, in
  XProf's words ("compute-bound on the GPU", "input-bound", "launch-bound", "host-bound"), then
  the other categories over TensorBoard's thresholds as secondary findings. One-off start-up
  calls (context creation, first allocations, a first launch's module load) are left out and
  said apart. Notes and caveats fold to one line under it: `w` shows them.
- **What to try** speaks the profile's framework (TensorFlow, PyTorch, JAX) and fits the device's
  row of the hardware table: number formats its matrix units run (no bf16 on a V100), the
  vendor's word for them (Tensor Cores, Matrix Cores, MXU); no mixed precision where device
  compute is already 16-bit.
- **16-bit share**: the part of device compute time in FP16/BF16 ops (from the steps, else from
  the device ops' types or kernel names, as the line says). **Tensor Cores / Matrix Cores**:
  kernel time on the matrix units, by the kernels' names (Volta to Blackwell, AMD MFMA).
- **Efficiency**: MFU = FLOPs per step ÷ step time ÷ (the device's dense peak for the number
  format the math ran in × devices); the line names the peak and where the FLOPs come from (XLA's
  cost, the profiler's `flops`, or recorded shapes), and says plainly when it has no peak (a CPU,
  a device the hardware table does not know) or no FLOPs. `T` sets your own peak per device
  (`--peak-tflops`; empty: the table's). Top ops and Kernels add FLOP/s and, where bytes are
  known, what bounds an op (memory or compute) and the share of its roof reached. **Memory**:
  peak allocated and reserved, and a sparkline of memory over the profile.
- **PyTorch sessions** also show the PyTorch TensorBoard plugin's own categories (kernel, memcpy,
  memset, communication, runtime, DataLoader, CPU exec, other) and, with several ranks, each
  rank's step time with the slowest marked. The plugin reads today's runtime calls as CPU exec;
  tuiprof counts them as runtime and says so.
- **Names** are shortened to what tells them apart: kernels lose `void`, namespaces, parameters
  and template plumbing (Eigen's kernels read as the expression they compute,
  `half[1d] = half(float[1d])`); op scopes lose their head, never the op. The selected row's full
  name is under the table.
- **Diff** (`m`, then `d`): each op's and kernel's time per step in A and B and the change
  Δ = B − A (negative: B spends less), sorted by how much it moves the step; `new` and `gone`
  mark ops that appear or vanish. Op self times add up per side (host or device) to the op time
  of a step, not to the step time: the rest is time outside any op. With one profile per side
  there is no spread, so small changes may be noise; `tuiprof diff EXPERIMENT_DIR` compares two
  variants over all their runs, with a standard error per row. The line under the table shows
  the selected row's full name.
- Analyses are cached by file size and time; a changed file is analysed again.
- **New experiment from a profile**: select a run's profile in Browse and press `r`: the dialog
  opens with that run's command and, where the advice names a change (mixed precision, XLA, a
  larger batch, the input pipeline) that the command exposes as an option or a `TUIPROF_*`
  setting the job reads, a second variant making it.
- **Distributions**: a metric a job reports many times per run (`latency_ms` per request) is
  compared by each run's p50, p90 and p99 (`latency_ms:p50` …).
- TensorFlow and JAX profiles (`*.xplane.pb`) of 200 MB or more (`TUIPROF_LARGE_MB`) are read
  by tuiprof's streaming reader: steps, breakdown and 16-bit share in seconds and little memory,
  no op or kernel tables. The command palette's "Toggle full analysis of large profiles" runs
  TensorBoard's converter on them too. PyTorch traces of any size get every table.
- Errors of background work are shown in one line; the traceback goes to
  `$XDG_STATE_HOME/tuiprof/errors.log` (by default `~/.local/state/tuiprof/errors.log`).

Press `escape` or `?` to close.
"""

# The profile tree's keys worth knowing, of Textual's own and ours.
TREE_ACTIONS = (
    "cursor_down",
    "cursor_up",
    "expand_node",
    "collapse_node",
    "select_cursor",
    "toggle_node",
    "scroll_home",
    "scroll_end",
)


def _key(binding: Binding) -> str:
    return binding.key_display or format_key(binding.key)


def key_rows(bindings: Iterable[BindingType], actions: Iterable[str] = ()) -> list[tuple[str, str]]:
    """(keys, what they do) per action, in the bindings' order; keys of one action together.

    `actions`, when given, picks those actions only, in that order."""
    by_action: dict[str, list[Binding]] = {}
    for b in Binding.make_bindings(bindings):
        by_action.setdefault(b.action, []).append(b)
    order = list(actions) or list(by_action)
    rows = []
    for action in order:
        group = by_action.get(action)
        if not group:
            continue
        described = [b for b in group if b.description]
        first = (described or group)[-1]  # ours (listed after Textual's) names it best
        what = first.description
        tooltip = next((b.tooltip for b in group if b.tooltip), "")
        if tooltip.lower().startswith(what.lower()):
            what = tooltip
        elif tooltip:
            what = f"{what}: {tooltip}"
        rows.append((" / ".join(dict.fromkeys(_key(b) for b in group)), what))
    return rows


def key_sections() -> list[tuple[str, list[tuple[str, str]]]]:
    """Every view's keys, from the classes that bind them."""
    from tui_prof.tui.app import TuiprofApp
    from tui_prof.tui.screens.browse import BrowseScreen
    from tui_prof.tui.screens.captures import CapturesScreen
    from tui_prof.tui.screens.diff import DiffScreen
    from tui_prof.tui.screens.experiments import ExperimentsScreen
    from tui_prof.tui.widgets.profile_tree import ProfileTree
    from tui_prof.tui.widgets.timeline_view import TimelineView

    tree = [b for cls in reversed(ProfileTree.__mro__) for b in getattr(cls, "BINDINGS", [])]
    return [
        ("Everywhere", [*key_rows(TuiprofApp.BINDINGS), ("ctrl+p", "Command palette")]),
        ("Browse", key_rows(BrowseScreen.BINDINGS)),
        ("Profile tree", key_rows(tree, TREE_ACTIONS)),
        ("Experiments", key_rows(ExperimentsScreen.BINDINGS)),
        ("Captures", key_rows(CapturesScreen.BINDINGS)),
        ("Diff", key_rows(DiffScreen.BINDINGS)),
        ("Timeline tab", key_rows(TimelineView.BINDINGS)),
    ]


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("`", "'")


def _key_tables(heading: str) -> list[str]:
    parts = []
    for title, rows in key_sections():
        parts.append(f"{heading.format(title)}\n| Key | Action |\n|---|---|")
        parts.extend(f"| `{_cell(k)}` | {_cell(what)} |" for k, what in rows)
        parts.append("")
    return parts


def help_markdown() -> str:
    return "\n".join([INTRO, *_key_tables("## Keys: {}"), NUMBERS])


KEYS_PAGE = """\
# Keys

<!-- Generated from the key bindings: python -m tui_prof.tui.screens.help > docs/keys.md -->

The footer shows the keys that apply where you are; `?` in the app shows these tables, built from
the same bindings.
"""


def keys_page() -> str:
    """docs/keys.md: the help's key tables, so the docs site cannot drift from the bindings."""
    return "\n".join([KEYS_PAGE, *_key_tables("## {}\n")]).rstrip() + "\n"


class HelpScreen(ModalScreen[None]):
    BINDINGS = [Binding("escape,question_mark,q", "dismiss", "Close")]

    def compose(self) -> ComposeResult:
        with VerticalScroll(id="help"):
            yield Markdown(help_markdown())


if __name__ == "__main__":
    print(keys_page(), end="")
