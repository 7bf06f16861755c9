"""Which Ray nodes can run an experiment's runs, and which node each block of runs goes to.

Contract (pure; the nodes come from Ray's state API, read by client.py):
- `wants(spec)` is what one run asks Ray for: CPUs, GPUs, and with `accelerator_type` a sliver
  of Ray's `accelerator_type:<model>` resource, which only nodes with that GPU model have.
- `slots(node, spec)` is how many such runs fit on a node at once; `eligible` are the alive
  nodes with at least one slot; `capacity` their total (what `--parallel` defaults to).
- `Placement.choose(block, nodes)` gives a block (one repeat of every variant) one node and
  keeps it there while that node lives, so the variants of a repeat share a node and node-to-node
  differences cancel in the comparison ("blocked"); a new block goes to the eligible node with
  the most free slots (this experiment's runs in flight counted), ties broken by name. Nodes in
  `avoid` (whose runs' results could not be read back) get no new block while others fit.
- `describe_missing(spec, nodes)` says, in one line, what no node offers.
- A node's `name` tells nodes apart even on one host: Ray's node name (its IP unless started
  with `--node-name`) and the start of its node id.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from tui_prof.experiments.backend_spec import BackendSpec

ACCELERATOR_PREFIX = "accelerator_type:"
SLIVER = 0.001  # of a node's accelerator_type resource: selects the model, takes nothing


@dataclass(frozen=True)
class Node:
    """A Ray node as placement needs it."""

    node_id: str
    node_name: str
    alive: bool
    node_ip: str = ""
    resources: Mapping[str, float] = field(default_factory=dict)
    is_head: bool = False
    message: str = ""  # why it is dead, where Ray says

    @property
    def name(self) -> str:
        return f"{self.node_name}/{self.node_id[:6]}"

    @property
    def accelerator(self) -> str | None:
        """The GPU model Ray detected (or was told), from its accelerator_type resource."""
        found = [
            k[len(ACCELERATOR_PREFIX) :] for k in self.resources if k.startswith(ACCELERATOR_PREFIX)
        ]
        return " + ".join(sorted(found)) if found else None

    @classmethod
    def from_state(cls, d: Mapping[str, Any]) -> Node:
        """From a `ray.util.state.list_nodes` entry (as a dict)."""
        return cls(
            node_id=str(d.get("node_id", "")),
            node_name=str(d.get("node_name") or d.get("node_ip") or "node"),
            node_ip=str(d.get("node_ip") or ""),
            alive=d.get("state") == "ALIVE",
            resources={str(k): float(v) for k, v in (d.get("resources_total") or {}).items()},
            is_head=bool(d.get("is_head_node")),
            message=str(d.get("state_message") or ""),
        )


def wants(spec: BackendSpec) -> dict[str, float]:
    """Ray resources one run asks for."""
    out = {"CPU": spec.cpus_per_run, "GPU": spec.gpus_per_run}
    if spec.accelerator_type:
        out[ACCELERATOR_PREFIX + spec.accelerator_type] = SLIVER
    return {k: v for k, v in out.items() if v > 0}


def slots(node: Node, spec: BackendSpec) -> int:
    """Runs of this spec that fit on the node at once (0: none)."""
    if not node.alive:
        return 0
    fit = math.inf
    for resource, amount in wants(spec).items():
        have = node.resources.get(resource, 0.0)
        if resource.startswith(ACCELERATOR_PREFIX):
            fit = fit if have > 0 else 0
        else:
            fit = min(fit, math.floor(have / amount + 1e-9))
    if fit == math.inf:  # asks for nothing countable: one at a time per CPU it has
        fit = max(1, int(node.resources.get("CPU", 1)))
    return int(fit)


def eligible(nodes: Iterable[Node], spec: BackendSpec) -> list[Node]:
    return sorted((n for n in nodes if slots(n, spec) > 0), key=lambda n: n.name)


def capacity(nodes: Iterable[Node], spec: BackendSpec) -> int:
    return sum(slots(n, spec) for n in eligible(nodes, spec))


def _offers(node: Node) -> str:
    parts = [f"{k} {v:g}" for k, v in sorted(node.resources.items()) if k in ("CPU", "GPU")]
    if node.accelerator:
        parts.append(node.accelerator)
    return f"{node.name}: {', '.join(parts) or 'nothing'}"


def describe_missing(spec: BackendSpec, nodes: Sequence[Node]) -> str:
    """One line: what a run asks for and what the alive nodes offer."""
    ask = wants(spec)
    asked = ", ".join(
        (
            f"GPU model {k[len(ACCELERATOR_PREFIX) :]}"
            if k.startswith(ACCELERATOR_PREFIX)
            else f"{v:g} {k}"
        )
        for k, v in ask.items()
    )
    alive = [n for n in nodes if n.alive]
    if not alive:
        return f"a run asks for {asked or 'nothing'}, and the cluster has no alive node"
    missing = []
    if spec.accelerator_type and not any(
        ACCELERATOR_PREFIX + spec.accelerator_type in n.resources for n in alive
    ):
        models = sorted({n.accelerator for n in alive if n.accelerator})
        missing.append(
            f"no node has GPU model {spec.accelerator_type} (models here: {', '.join(models) or 'none'})"
        )
    shown = "; ".join(_offers(n) for n in alive[:4]) + (
        f"; {len(alive) - 4} more" if len(alive) > 4 else ""
    )
    why = missing[0] if missing else "no node offers all of it"
    return f"a run asks for {asked}: {why} [{shown}]"


@dataclass
class Placement:
    """Blocks of runs to nodes (see the module contract); not thread-safe: the caller locks."""

    spec: BackendSpec
    blocks: dict[Hashable, str] = field(default_factory=dict)  # block -> node id
    in_flight: Counter[str] = field(default_factory=Counter)  # node id -> runs submitted there
    avoid: set[str] = field(default_factory=set)  # nodes whose runs' results could not be read

    def choose(self, block: Hashable, nodes: Sequence[Node]) -> Node | None:
        """The node for a run of `block` (None: no eligible node; spread: let Ray choose)."""
        if self.spec.placement != "blocked":
            return None
        fit = eligible(nodes, self.spec)
        fit = [n for n in fit if n.node_id not in self.avoid] or fit
        by_id = {n.node_id: n for n in fit}
        if block in self.blocks and self.blocks[block] in by_id:
            return by_id[self.blocks[block]]
        if not fit:
            return None
        best = max(
            fit, key=lambda n: (slots(n, self.spec) - self.in_flight[n.node_id], -fit.index(n))
        )
        self.blocks[block] = best.node_id
        return best

    def pin(self, block: Hashable, node_id: str) -> None:
        """Record where a block's run already is (a reattached run), so its block follows it."""
        self.blocks.setdefault(block, node_id)

    def submitted(self, node_id: str | None) -> None:
        if node_id:
            self.in_flight[node_id] += 1

    def ended(self, node_id: str | None) -> None:
        if node_id and self.in_flight[node_id] > 0:
            self.in_flight[node_id] -= 1
