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


def _session_label(session: Session, problem: str | None) -> Text:
    label = Text(("⚠ " if problem else "") + session.name, style="red" if problem else "")
    n = len(session.hosts)
    label.append(f"  {n} host{'s' if n != 1 else ''}", style="dim")
    return label


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

    def populate(self, discovery: Discovery) -> None:
        """Rebuild from a discovery, keeping the cursor on the same session where possible.

        Runs that share a head are nested under it (`experiment/runs/` › `float32-r0`, `mixed-r0`),
        so each line shows what tells its run apart, not a head cut off at the tree's edge."""
        current = self.cursor_node.data if self.cursor_node else None
        self.clear()
        self._session_nodes.clear()
        runs = discovery.runs
        for branch in nest([r.name for r in runs]):
            self._add_branch(self.root, branch, runs)
        if isinstance(current, Session) and str(current.path) in self._session_nodes:
            self.move_cursor(self._session_nodes[str(current.path)])

    def _add_branch(
        self, parent: TreeNode[NodeData], branch: Branch, runs: tuple[Run, ...]
    ) -> None:
        if branch.index is None:  # a folder that only groups runs
            node = parent.add(Text(branch.label, style="dim bold"), data=None, expand=True)
        else:
            run = runs[branch.index]
            node = parent.add(Text(branch.label, style="bold"), data=run, expand=True)
            for sess in run.sessions:
                snode = node.add(_session_label(sess, None), data=sess, expand=False)
                self._session_nodes[str(sess.path)] = snode
                for h in sess.hosts:
                    hl = Text(h.host)
                    hl.append(f"  {_size(h.size)}", style="dim")
                    snode.add_leaf(hl, data=h)
        for child in branch.children:
            self._add_branch(node, child, runs)

    def first_session_node(self) -> TreeNode[NodeData] | None:
        return next(iter(self._session_nodes.values()), None)

    def mark(self, session: Session, problem: str | None) -> None:
        """Flag a session that failed to load (or clear the flag)."""
        node = self._session_nodes.get(str(session.path))
        if node is not None:
            node.set_label(_session_label(session, problem))

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
