"""What a host event's name makes it: a step marker, an optimizer step, a DataLoader span, a
collective. torch-tb-profiler's rules (event_parser.py, trace.py), in one place for the summary's
Collector and the timeline's rows (timeline/kineto_rows.py), which must agree on them."""

from __future__ import annotations

STEP_PREFIX = "ProfilerStep#"
OPTIMIZER_PREFIX = "Optimizer.step#"
# torch-tb-profiler's NcclOpNameSet and GlooOpNameSet (trace.py).
COMM_OPS = frozenset(
    f"{lib}:{op}"
    for lib in ("nccl", "gloo")
    for op in ("broadcast", "reduce", "all_reduce", "all_gather", "reduce_scatter")
)

# A name's roles, found once per distinct name (Collector._new_name), as bits.
ROLE_OPTIMIZER = 1
ROLE_DATALOADER = 2
ROLE_COMM = 4  # never with ROLE_DATALOADER: a DataLoader span is not a collective
ROLE_STEP_NAME = 8  # starts with STEP_PREFIX, whether or not a step number follows
# Annotations the timeline draws (the others, ProfilerStep#N included, only nest ops).
SHOWN_ANNOTATION = ROLE_DATALOADER | ROLE_COMM


def is_dataloader(name: str) -> bool:
    """The plugin's DataLoader rule (event_parser.py, StepParser._parse_step)."""
    return (name.startswith("enumerate(DataLoader)#") and name.endswith(".__next__")) or (
        name.startswith("enumerate(DataPipe)#")
    )


def step_number(name: str) -> int:
    """N of a `ProfilerStep#N` marker; -1 for any other name."""
    if name.startswith(STEP_PREFIX):
        try:
            return int(name[len(STEP_PREFIX) :])
        except ValueError:
            return -1
    return -1


def roles(name: str) -> int:
    """The ROLE_* bits of a host event's name."""
    role = ROLE_STEP_NAME if name.startswith(STEP_PREFIX) else 0
    if name.startswith(OPTIMIZER_PREFIX):
        role |= ROLE_OPTIMIZER
    if is_dataloader(name):
        role |= ROLE_DATALOADER
    elif name in COMM_OPS:
        role |= ROLE_COMM
    return role
