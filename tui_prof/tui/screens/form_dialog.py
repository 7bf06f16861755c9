"""What the `r` and `a` dialogs share: validate on Enter or the primary button, cancel on Escape."""

from __future__ import annotations

from typing import Generic, TypeVar

from rich.text import Text
from textual.binding import Binding
from textual.screen import ModalScreen
from textual.widgets import Button, Static

R = TypeVar("R")


class FormDialog(ModalScreen[R | None], Generic[R]):
    """Subclasses build the form and `validated()`; an error stays in the dialog, in one line."""

    BINDINGS = [Binding("escape", "cancel", "Cancel")]
    PRIMARY = "ok"  # id of the button that submits
    ERROR = "#form-error"  # the Static that shows a validation error
    ERRORS: tuple[type[Exception], ...] = (ValueError, OSError)  # what `validated` raises to stay

    def validated(self) -> R:
        """The request, or raise one of ERRORS, whose message is shown in the dialog."""
        raise NotImplementedError

    def _submit(self) -> None:
        try:
            result = self.validated()
        except self.ERRORS as exc:
            self.query_one(self.ERROR, Static).update(Text(str(exc), style="bold red"))
            return
        self.dismiss(result)

    def on_button_pressed(self, event: Button.Pressed) -> None:
        if event.button.id == self.PRIMARY:
            self._submit()
        else:
            self.dismiss(None)

    def on_input_submitted(self) -> None:
        self._submit()

    def action_cancel(self) -> None:
        self.dismiss(None)
