"""Command palette entries for the actions that have no key in the footer."""

from __future__ import annotations

from functools import partial

from textual.command import DiscoveryHit, Hit, Hits, Provider

COMMANDS: tuple[tuple[str, str, str], ...] = (
    ("Rescan logdir", "screen.rescan", "List the open path again"),
    (
        "Toggle own step finder",
        "screen.toggle_fallback",
        "Cross-check official steps with tuiprof's own",
    ),
    (
        "Steps from an XLA program…",
        "screen.choose_step_program",
        "JAX/XLA: take each run of a jitted function as a step (tuiprof summary --step-program)",
    ),
    (
        "Toggle full analysis of large profiles",
        "screen.toggle_full",
        "Run TensorBoard's converter even on profiles over $TUIPROF_LARGE_MB (op and kernel tables)",
    ),
    (
        "Peak TFLOP/s for MFU…",
        "screen.set_peak",
        "The dense peak per device MFU divides by (tuiprof --peak-tflops); empty: the table's",
    ),
    ("Overview tab", "screen.tab('tab-overview')", "Headline, breakdown, precision, advice"),
    ("Steps tab", "screen.tab('tab-steps')", "Per-step breakdown table"),
    ("Top ops tab", "screen.tab('tab-ops')", "Framework ops by self time"),
    (
        "Kernels tab",
        "screen.tab('tab-kernels')",
        "GPU kernels and matrix-unit (Tensor Core / Matrix Core) use",
    ),
    ("Mark session as A for a diff", "screen.mark_diff", "Then select another session: d"),
    ("Diff with the marked session", "screen.diff", "A against the selected session, op by op"),
    ("Diff view", "app.show('diff')", "The last diff of two sessions or variants"),
    ("Swap diff sides", "screen.swap", "Compare B with A instead"),
    ("Help", "app.help", "Keys and what the numbers mean"),
)


def _available(screen: object, action: str) -> bool:
    """Screen actions are offered only on the screen that has them (the browse view's, mostly)."""
    if not action.startswith("screen."):
        return True
    return hasattr(screen, "action_" + action.removeprefix("screen.").split("(")[0])


class TuiprofCommands(Provider):
    def _commands(self) -> list[tuple[str, str, str]]:
        return [c for c in COMMANDS if _available(self.screen, c[1])]

    async def discover(self) -> Hits:
        for name, action, help_text in self._commands():
            yield DiscoveryHit(name, partial(self.app.run_action, action), help=help_text)

    async def search(self, query: str) -> Hits:
        matcher = self.matcher(query)
        for name, action, help_text in self._commands():
            score = matcher.match(name)
            if score > 0:
                yield Hit(
                    score,
                    matcher.highlight(name),
                    partial(self.app.run_action, action),
                    help=help_text,
                )
