"""The `?` help: keys and what the screens show, kept next to the bindings it describes."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Markdown

HELP = """\
# tuiprof

Browse TensorBoard and JAX profiles (`*.xplane.pb`; older `*.overview_page.pb` too) and PyTorch
profiler traces (`*.pt.trace.json[.gz]`, other Kineto JSON) offline: runs → sessions → hosts
(ranks) on the left, the selected session on the right. The tree follows the logdir: sessions a
running job writes appear within a second or two (`f5` lists new PyTorch traces).

**Experiments** (`e`): runs of repeated experiments, live, with the selected run's log and the
comparison: the speed/quality trade-off (medians, quartiles, worst run, Pareto front, scatter),
statistics, confidence intervals (paired by repeat where every repeat has a run of each variant),
how many repeats would resolve an open question, and box plots. **Captures** (`c`): profiles captured
from running jobs with `a`, one breakdown bar per capture.

## Keys
| Key | Action |
|---|---|
| `↑`/`↓`, `j`/`k` | move in the tree (selecting a session analyses it) |
| `→`/`←`, `l`/`h`, `enter` | expand / collapse |
| `tab` | next pane (tree, tabs, tables) |
| `1` `2` `3` `4` | Overview, Steps, Top ops, Kernels tab |
| `F` | use tuiprof's own step finder instead of official markers (cross-check) |
| `P` | steps from the runs of an XLA program (JAX): pick which, or automatic |
| `m` | mark the selected session as A of a diff (`m` again: unmark) |
| `d` | diff: A against the selected session (B), op by op and kernel by kernel |
| `d` | Experiments: diff the baseline against the selected run's variant (all their runs) |
| `s` / `esc` | Diff: swap A and B / back to Browse |
| `f5`, `ctrl+r` | list the logdir again |
| `b` / `e` / `c` | Browse, Experiments, Captures view |
| `r` | new experiment: variants as `NAME=COMMAND` lines (or a spec file), repeats, save the spec |
| `x` / `X` | Experiments: stop the selected run / all runs |
| `a` | capture a profile from a running job's profiler server (once or every N seconds) |
| `s` | Captures: stop capturing |
| `ctrl+p` | command palette |
| `?` | this help |
| `q` | quit |

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
- **16-bit share**: the part of device compute time in FP16/BF16 ops (from the steps, else from
  the device ops' types or kernel names, as the line says). **TensorCore**: kernel time on
  TensorCores.
- **PyTorch sessions** also show the PyTorch TensorBoard plugin's own categories (kernel, memcpy,
  memset, communication, runtime, DataLoader, CPU exec, other) and, with several ranks, each
  rank's step time with the slowest marked. The plugin reads today's runtime calls as CPU exec;
  tuiprof counts them as runtime and says so.
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
- Profiles of 200 MB or more (`TUIPROF_LARGE_MB`) are read by tuiprof's streaming reader: steps,
  breakdown and 16-bit share in seconds and little memory, no op or kernel tables. The command
  palette's "Toggle full analysis of large profiles" runs TensorBoard's converter on them too.

Press `escape` or `?` to close.
"""


class HelpScreen(ModalScreen[None]):
    BINDINGS = [Binding("escape,question_mark,q", "dismiss", "Close")]

    def compose(self) -> ComposeResult:
        with VerticalScroll(id="help"):
            yield Markdown(HELP)
