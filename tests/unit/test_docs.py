"""The docs site's key reference is the help's, generated from the bindings: a key added, moved or
renamed without regenerating docs/keys.md fails here."""

from __future__ import annotations

from pathlib import Path

import pytest

from tui_prof.tui.screens.help import keys_page

DOCS = Path(__file__).resolve().parents[2] / "docs"


def test_keys_page_matches_the_bindings() -> None:
    assert (DOCS / "keys.md").read_text() == keys_page(), (
        "docs/keys.md differs from the bindings: python -m tui_prof.tui.screens.help > docs/keys.md"
    )


def test_keys_page_lists_every_view() -> None:
    page = (DOCS / "keys.md").read_text()
    for view in ("Everywhere", "Browse", "Profile tree", "Experiments", "Captures", "Diff"):
        assert f"## {view}\n" in page
    assert "| `d` |" in page and "| `m` |" in page


def test_the_front_page_and_the_browsing_page_count_the_tabs() -> None:
    """README's quick start ("1–4 switch tabs") and docs/browsing.md ("four tabs") lagged the
    Timeline tab: both must count the browse screen's tab keys."""
    from textual.binding import Binding

    from tui_prof.tui.screens.browse import BrowseScreen

    tabs = [b for b in Binding.make_bindings(BrowseScreen.BINDINGS) if b.action.startswith("tab(")]
    assert [b.key for b in tabs] == [str(i) for i in range(1, len(tabs) + 1)]
    readme = (DOCS.parent / "README.md").read_text()
    assert f"1–{len(tabs)} switch tabs" in readme
    words = {4: "four", 5: "five", 6: "six"}
    browsing = (DOCS / "browsing.md").read_text()
    assert f"above {words[len(tabs)]} tabs:" in browsing
    listed = [ln for ln in browsing.splitlines() if ln.startswith("- **")]
    for b in tabs:
        title = b.description.removesuffix(" tab")
        assert any(ln.startswith(f"- **{title}**") for ln in listed), title


def test_the_help_says_which_large_profiles_lose_their_tables(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The help said "Profiles of 200 MB or more … no op or kernel tables": only XSpace profiles
    skip TensorBoard's converter; a PyTorch trace over the limit keeps its op and kernel tables."""
    from tui_prof.profiles.load import summarize_session
    from tui_prof.tui.screens.help import help_markdown

    samples = DOCS.parent / "sample_traces"
    monkeypatch.setenv("TUIPROF_LARGE_MB", "0.001")  # every sample is "large"
    xspace = summarize_session(samples / "jax_cuda_bf16")
    torch = summarize_session(samples / "torch_cuda_float32")
    assert not xspace.top_ops and not xspace.kernels
    assert torch.top_ops and torch.kernels
    text = " ".join(help_markdown().split())
    large = text[text.index("(`TUIPROF_LARGE_MB`)") - 80 :]
    assert "(`*.xplane.pb`) of 200 MB or more" in large
    assert "PyTorch traces of any size get every table" in large
