"""The docs site's key reference is the help's, generated from the bindings: a key added, moved or
renamed without regenerating docs/keys.md fails here."""

from __future__ import annotations

from pathlib import Path

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
