"""The runs → sessions → hosts tree; labels are Text, so names from disk are never markup."""

from __future__ import annotations

from rich.text import Text
from textual.binding import Binding
from textual.widgets import Tree
from textual.widgets.tree import TreeNode

from tui_prof.profiles.discover import Discovery, HostFile, Run, Session
from tui_prof.render.names import Branch, nest

NodeData = Run | Session | HostFile | None


def _size(n: int) -> str:
    size = float(n)
    for unit in ("B", "KB", "MB"):
        if size < 1024:
            return f"{size:.0f} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    return f"{size:.1f} GB"


def _hosts_label(session: Session) -> str:
    """How many host files: hosts for TensorFlow/JAX, ranks for PyTorch traces (one per rank)."""
    n = len(session.hosts)
    noun = "rank" if session.format == "kineto" else "host"
    return f"  {n} {noun}{'s' if n != 1 else ''}"


class ProfileTree(Tree[NodeData]):
    """Runs, their sessions and each session's host files."""

    BINDINGS = [
        Binding("j", "cursor_down", "Down", show=False),
        Binding("k", "cursor_up", "Up", show=False),
        Binding("l", "expand_node", "Expand", show=False),
        Binding("h", "collapse_node", "Collapse", show=False),
        Binding("g", "scroll_home", "Top", show=False),
        Binding("G", "scroll_end", "Bottom", show=False),
    ]

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__("profiles", id=id)
        self.show_root = False
        self.guide_depth = 2
        self._session_nodes: dict[str, TreeNode[NodeData]] = {}
        self._problems: dict[str, str] = {}
        self._marked: str | None = None  # the session marked as A for a diff
        # The session the cursor is to land on once the tree has laid out its lines; kept
        # across a rebuild, so a rescan that comes before the move does not lose it.
        self._cursor_to: str | None = None

    def populate(self, discovery: Discovery) -> None:
        """Rebuild from a discovery, keeping the cursor on the same session where possible.

        Runs that share a head are nested under it (`experiment/runs/` › `float32-r0`, `mixed-r0`),
        so each line shows what tells its run apart, not a head cut off at the tree's edge."""
        current = self.cursor_node.data if self.cursor_node else None
        if self._cursor_to is None and isinstance(current, Session):
            self._cursor_to = str(current.path)
        self.clear()
        self._session_nodes.clear()
        self._problems.clear()  # a new listing: sessions are judged again when selected
        runs = discovery.runs
        for branch in nest([r.name for r in runs]):
            self._add_branch(self.root, branch, runs)
        if self._cursor_to is not None:
            self.call_after_refresh(self._land_cursor)

    def move_to_session(self, node: TreeNode[NodeData]) -> None:
        """Put the cursor on a session's line once the tree has laid it out (on the next refresh:
        moved before it, the cursor stays where it was)."""
        if isinstance(node.data, Session):
            self._cursor_to = str(node.data.path)
            self.call_after_refresh(self._land_cursor)

    def _land_cursor(self, tries: int = 5) -> None:
        node = self._session_nodes.get(self._cursor_to or "")
        if node is None:
            self._cursor_to = None
            return
        self.move_cursor(node)
        if self.cursor_node is node or tries == 0:
            self._cursor_to = None
        else:  # its line is not laid out yet
            self.call_after_refresh(self._land_cursor, tries - 1)

    def _add_branch(
        self, parent: TreeNode[NodeData], branch: Branch, runs: tuple[Run, ...]
    ) -> None:
        if branch.index is None:  # a folder that only groups runs
            node = parent.add(Text(branch.label, style="dim bold"), data=None, expand=True)
        else:
            run = runs[branch.index]
            node = parent.add(Text(branch.label, style="bold"), data=run, expand=True)
            for sess in run.sessions:
                snode = node.add(self._label(sess), data=sess, expand=False)
                self._session_nodes[str(sess.path)] = snode
                for h in sess.hosts:
                    hl = Text(h.host)
                    hl.append(f"  {_size(h.size)}", style="dim")
                    snode.add_leaf(hl, data=h)
        for child in branch.children:
            self._add_branch(node, child, runs)

    def first_session_node(self) -> TreeNode[NodeData] | None:
        return next(iter(self._session_nodes.values()), None)

    def _label(self, session: Session) -> Text:
        key = str(session.path)
        problem = self._problems.get(key)
        label = Text()
        if key == self._marked:
            label.append("A▸ ", style="bold reverse")
        label.append(("⚠ " if problem else "") + session.name, style="red" if problem else "")
        label.append(_hosts_label(session), style="dim")
        return label

    def mark(self, session: Session, problem: str | None) -> None:
        """Flag a session that failed to load (or clear the flag)."""
        key = str(session.path)
        if problem:
            self._problems[key] = problem
        else:
            self._problems.pop(key, None)
        node = self._session_nodes.get(key)
        if node is not None:
            node.set_label(self._label(session))

    def set_marked(self, session: Session | None) -> None:
        """Show which session is A of the next diff (None: no mark)."""
        old, self._marked = self._marked, str(session.path) if session is not None else None
        for key in {old, self._marked} - {None}:
            node = self._session_nodes.get(str(key))
            if node is not None and isinstance(node.data, Session):
                node.set_label(self._label(node.data))

    def action_expand_node(self) -> None:
        if self.cursor_node is not None:
            self.cursor_node.expand()

    def action_collapse_node(self) -> None:
        node = self.cursor_node
        if node is None:
            return
        if node.is_expanded and node.children:
            node.collapse()
        elif node.parent is not None and node.parent is not self.root:
            self.move_cursor(node.parent)
