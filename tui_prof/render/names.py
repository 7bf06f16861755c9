"""Names from traces, shortened to what tells them apart on an 80-column screen.

Contract: pure functions of strings, used by `tuiprof summary` and the TUI alike; they never
raise on odd input (a name they cannot parse comes back whole). `TailCut` is the one renderable:
`cut_left` applied at whatever width Rich or Textual draws it. Kernel names are demangled C++
(`void Eigen::internal::EigenMetaKernel<…>(…)`, `void at::native::vectorized_elementwise_kernel<4,
…>(…)`, `ampere_sgemm_128x64_tn`): `kernel_names` drops the return type, parameters, namespaces
and template plumbing, and keeps as much of the template arguments as it takes for each name to
differ from the others. Op names are scopes (`a/b/c`): they lose their head, never their tail.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field

ELLIPSIS = "…"


# -- cutting to a width --------------------------------------------------------------------
def cut_left(text: str, width: int, sep: str = "/") -> str:
    """The tail of `text` in `width` cells, cut at a `sep` where one is near: `…/MatMul/MatMul_1`."""
    if len(text) <= width:
        return text
    if width <= 1:
        return ELLIPSIS[:width]
    tail = text[-(width - 1) :]
    cut = tail.find(sep)
    if 0 <= cut < len(tail) // 2 and cut + 1 < len(tail):
        tail = tail[cut:]
    return ELLIPSIS + tail


def cut_middle(text: str, width: int) -> str:
    """Head and tail of `text` in `width` cells: `EigenMeta…(float[1d])`."""
    if len(text) <= width:
        return text
    if width <= 1:
        return ELLIPSIS[:width]
    head = (width - 1) // 2 + (width - 1) % 2
    return text[:head] + ELLIPSIS + text[len(text) - (width - 1 - head) :]


def fit_paths(names: Sequence[str], width: int, sep: str = "/") -> list[str]:
    """Scoped names in `width` cells, each keeping its tail; where two would read the same, the
    nearest scopes that differ stay too, while they fit: `…/layer_12/…/RandomUniform`."""
    fitted = [cut_left(n, width, sep) for n in names]
    parts = [n.split(sep) for n in names]
    must: list[set[int]] = [{-1} for _ in names]  # components kept, counted from the tail

    def fit(p: list[str], keep: set[int]) -> str:
        keep = set(keep)
        for t in range(-2, -len(p) - 1, -1):  # then as much of the tail as fits
            if t not in keep and len(_with_parts(p, keep | {t}, sep)) > width:
                break
            keep.add(t)
        return _with_parts(p, keep, sep)

    for _ in range(8):
        groups: dict[str, set[int]] = {}
        for i, f in enumerate(fitted):
            groups.setdefault(f, set()).add(i)
        changed = False
        for i, p in enumerate(parts):
            others = [parts[j] for j in groups[fitted[i]] if names[j] != names[i]]
            for k in range(-2, -len(p) - 1, -1) if others else ():
                if k in must[i] or all(len(o) >= -k and o[k] == p[k] for o in others):
                    continue  # the nearest differing scope not yet kept ...
                for keep in (must[i] | {k}, {-1, k}):  # ... with the others kept, or alone
                    if len(_with_parts(p, keep, sep)) <= width:
                        must[i] = keep
                        fitted[i] = fit(p, keep)
                        changed = True
                        break
                break
        if not changed:
            break
    return fitted


def _with_parts(parts: list[str], keep: set[int], sep: str) -> str:
    """The kept components (counted from the tail), the others each run of them one `…`."""
    out: list[str] = []
    for k in range(-len(parts), 0):
        if k in keep:
            out.append(parts[k])
        elif not out or out[-1] != ELLIPSIS:
            out.append(ELLIPSIS)
    return sep.join(out)


# -- demangled C++ names -------------------------------------------------------------------
@dataclass
class _Part:
    """One `::`-separated piece: `vectorized_elementwise_kernel<…>`, `{lambda(float)#1}`, `f(…)`."""

    ident: str
    targs: list[_Name] | None = None
    fargs: list[_Name] | None = None


@dataclass
class _Name:
    parts: list[_Part] = field(default_factory=list)


_CLOSE = {"<": ">", "(": ")", "{": "}", "[": "]"}
_STOP = set("<>(),{}:")


class _Parser:
    def __init__(self, text: str) -> None:
        self.s, self.i = text, 0

    def peek(self, n: int = 1) -> str:
        return self.s[self.i : self.i + n]

    def skip_spaces(self) -> None:
        while self.peek() == " ":
            self.i += 1

    def balanced(self) -> str:
        """From an opening bracket to its match, as text."""
        start, depth = self.i, 0
        while self.i < len(self.s):
            c = self.s[self.i]
            if c in _CLOSE:
                depth += 1
            elif c in _CLOSE.values():
                depth -= 1
                if depth == 0:
                    self.i += 1
                    return self.s[start : self.i]
            self.i += 1
        raise ValueError("unbalanced")

    def name(self) -> _Name:
        name = _Name()
        while True:
            name.parts.append(self.part())
            if self.peek(2) == "::":
                self.i += 2
                continue
            return name

    def part(self) -> _Part:
        self.skip_spaces()
        ident = ""
        if self.peek() in "{(":  # {lambda(float)#1}, (anonymous namespace), (cub::Algo)3
            ident = self.balanced()
        start = self.i
        while self.i < len(self.s) and self.s[self.i] not in _STOP:
            self.i += 1
        ident += self.s[start : self.i]
        if ident.endswith("operator") and self.peek(2) == "()":  # operator()(…)
            self.i += 2
            ident += "()"
        part = _Part(ident.strip())
        if self.peek() == "<":
            part.targs = self.args(">")
        if self.peek() == "(":
            part.fargs = self.args(")")
        start = self.i  # trailing qualifiers: ` const`, `*`, `&`
        while self.i < len(self.s) and self.s[self.i] not in _STOP:
            self.i += 1
        part.ident = (part.ident + " " + self.s[start : self.i].strip()).strip()
        return part

    def args(self, close: str) -> list[_Name]:
        self.i += 1
        out: list[_Name] = []
        self.skip_spaces()
        if self.peek() == close:
            self.i += 1
            return out
        while True:
            out.append(self.name())
            self.skip_spaces()
            c = self.peek()
            self.i += 1
            if c == close:
                return out
            if c != ",":
                raise ValueError(f"expected , or {close}")


def _parse(text: str) -> _Name | None:
    body = text.strip()
    if body.startswith("void "):
        body = body[5:]
    try:
        p = _Parser(body)
        name = p.name()
    except (ValueError, IndexError, RecursionError):
        return None
    return name if p.i == len(body) else None


# Template arguments that only plumb (argument packs, offset calculators, load/store policies,
# Eigen's pointer and device types): shown at the most detailed level only.
_PLUMBING = {
    "Array",
    "array",
    "TrivialOffsetCalculator",
    "OffsetCalculator",
    "LoadWithCast",
    "StoreWithCast",
    "LoadWithoutCast",
    "StoreWithoutCast",
    "MakePointer",
    "GpuDevice",
    "ThreadPoolDevice",
    "DefaultDevice",
    "RestrictPtrTraits",
    "DefaultPtrTraits",
}
_NUMBER = re.compile(r"^(\([\w: ]+\))?-?\d+[ul]*$|^(true|false)$")  # 4, 2ul, (cub::Algo)3
_QUALIFIERS = re.compile(r"\b(const|volatile)\b")
_NOISE_PARTS = re.compile(r"^(\{lambda.*\}|\(anonymous namespace\)|operator\(\).*|\{unnamed.*\})$")
_EIGEN_EXPR = re.compile(r"^Tensor(\w+?)Op$")
_EIGEN_FUNCTOR = re.compile(r"^scalar_(\w+?)_op$")

# Levels of detail, each adding to the one before: 0 the function alone; 1 its type arguments;
# 2 lambdas' parameter types; 3 numbers and flags; 4 plumbing and qualifiers' own arguments;
# 5 the parameters of the function itself. Past these, the name in full.
_LEVELS = 6


def _clean(ident: str) -> str:
    return re.sub(r"\s+", " ", _QUALIFIERS.sub("", ident)).replace(" *", "*").strip()


def _lambda_params(part: _Part) -> str:
    m = re.match(r"\{lambda(\(.*\))#\d+\}", part.ident)
    return m.group(1) if m else ""


def _render_name(name: _Name, level: int) -> str:
    """A qualified name as its last meaningful piece; a lambda inside it as `λ(params)`."""
    meaningful = [p for p in name.parts if not _NOISE_PARTS.match(p.ident)]
    if not meaningful:
        return _clean(name.parts[-1].ident)
    last = meaningful[-1]
    text = _render_part(last, level)
    if level >= 4:  # `Policy<long, float>::Policy800`: the qualifier's arguments tell them apart
        owners = [p for p in meaningful[:-1] if p.targs]
        if owners:
            text = _render_part(owners[-1], level) + "::" + text
    after = name.parts[name.parts.index(last) + 1 :]
    lambdas = [p for p in after if p.ident.startswith("{lambda")]
    if lambdas and level >= 2:
        text += " λ" + _lambda_params(lambdas[-1])
    return text


def _shown_args(targs: list[_Name], level: int) -> list[_Name]:
    kept = []
    for a in targs:
        last = _clean(a.parts[-1].ident)
        if level < 3 and len(a.parts) == 1 and _NUMBER.match(last):
            continue
        if level < 4 and last in _PLUMBING:
            continue
        kept.append(a)
    return kept


def _join(args: list[str]) -> str:
    """Arguments, a run of equal ones written once: `float×8`."""
    out: list[str] = []
    i = 0
    while i < len(args):
        j = i
        while j + 1 < len(args) and args[j + 1] == args[i]:
            j += 1
        out.append(args[i] if j - i < 2 else f"{args[i]}×{j - i + 1}")
        i = j + 1 if j - i >= 2 else i + 1
    return ", ".join(out)


def _render_part(part: _Part, level: int) -> str:
    eigen = _render_eigen(part, level)
    if eigen is not None:
        return eigen
    text = _clean(part.ident)
    if level >= 1 and part.targs:
        args = [_render_name(a, level) for a in _shown_args(part.targs, level)]
        text += f"<{_join(args)}>" if args else ""
    if level >= 5 and part.fargs is not None:
        text += f"({_join([_render_name(a, level) for a in part.fargs])})"
    return text


def _render_eigen(part: _Part, level: int) -> str | None:
    """Eigen's expression templates as the expression they compute: `half[1d] = half(float[1d])`."""
    ident = _clean(part.ident)
    targs = part.targs or []

    def arg(i: int) -> str:
        return _render_name(targs[i], max(level, 1)) if i < len(targs) else "?"

    if ident == "EigenMetaKernel" and targs:
        return "Eigen " + arg(0) if level >= 1 else "Eigen"
    if ident == "TensorEvaluator" and targs:
        return arg(0)
    if ident in ("TensorMap", "Tensor") and targs:
        inner = targs[0].parts[-1]
        if ident == "TensorMap" and inner.targs and _clean(inner.ident) == "Tensor":
            return _render_part(inner, level)
        dtype = _clean(_render_name(targs[0], 1))
        rank = _clean(targs[1].parts[-1].ident) if len(targs) > 1 else "?"
        return f"{dtype}[{rank}d]"
    functor = _EIGEN_FUNCTOR.match(ident)
    if functor and level < 4:
        return functor.group(1)
    if ident in ("scalar_left", "scalar_right") and len(targs) >= 3:
        return f"{ident}:{_render_name(targs[2], level if level >= 4 else 0)}"
    expr = _EIGEN_EXPR.match(ident)
    if not expr or not targs:
        return None
    kind = expr.group(1)
    if kind == "Assign" and len(targs) == 2:
        return f"{arg(0)} = {arg(1)}"
    if kind == "Conversion" and len(targs) == 2:
        return f"{arg(0)}({arg(1)})"
    if kind in ("CwiseUnary", "CwiseBinary", "CwiseTernary"):
        op, operands = arg(0), [arg(i) for i in range(1, len(targs))]
        if op.startswith("scalar_left:"):
            return f"{op.split(':', 1)[1]}(c, {operands[0]})"
        if op.startswith("scalar_right:"):
            return f"{op.split(':', 1)[1]}({operands[0]}, c)"
        return f"{op}({', '.join(operands)})"
    if kind == "Broadcasting" and len(targs) == 2:
        return f"broadcast({arg(1)})"
    shown = [_render_name(a, max(level, 1)) for a in _shown_args(targs, level)]
    return f"{kind.lower()}({', '.join(shown)})"


def kernel_name(name: str, level: int = 1) -> str:
    """One kernel's name without return type, parameters, namespaces or plumbing."""
    parsed = _parse(name)
    if parsed is None:
        return name.strip()
    return _render_name(parsed, level) or name.strip()


def kernel_names(names: Sequence[str]) -> list[str]:
    """Short names, as short as each can be while differing from every other different name.

    Names equal in full stay equal (one kernel launched in two shapes): callers add what tells
    those apart (grid, block)."""
    parsed = [_parse(n) for n in names]
    levels = [1] * len(names)  # the function and its type arguments, at least

    def render(i: int) -> str:
        p = parsed[i]
        if p is None or levels[i] >= _LEVELS:
            return names[i].strip()
        return _render_name(p, levels[i]) or names[i].strip()

    shown = [render(i) for i in range(len(names))]
    for _ in range(_LEVELS):
        groups: dict[str, set[str]] = {}
        for i, s in enumerate(shown):
            groups.setdefault(s, set()).add(names[i])
        clashing = [i for i, s in enumerate(shown) if len(groups[s]) > 1]
        if not clashing:
            break
        for i in clashing:
            levels[i] += 1
            shown[i] = render(i)
    return shown


def fit_kernel(short: str, width: int, *, unique_function: bool = False) -> str:
    """A short kernel name in `width` cells. A function that shares its name with others (a
    wrapper such as `vectorized_elementwise_kernel`) gives way before its arguments, which tell
    them apart (`vectoriz…<CUDAFunctor_add<float>>`); a function alone of its name keeps it."""
    if len(short) <= width:
        return short
    if short.startswith("Eigen "):  # the expression tells them apart: its left side goes first
        return cut_left(short.removeprefix("Eigen "), width, sep=" ")
    head, sep, rest = short.partition("<")
    if unique_function and len(head) + 2 <= width:
        return short[: width - 1] + ELLIPSIS
    if sep:
        room = width - len(rest) - 2  # "…<"
        if room >= 6:
            return head[:room] + ELLIPSIS + sep + rest
        return cut_middle(head[:5] + ELLIPSIS + sep + rest, width)
    return cut_middle(short, width)


def _common_prefix(a: str, b: str) -> int:
    n = 0
    for x, y in zip(a, b, strict=False):
        if x != y:
            break
        n += 1
    return n


def fit_kernels(shorts: Sequence[str], width: int) -> list[str]:
    """Each short name in `width` cells; where two different names would read the same, the
    window moves to where they differ: `index_el…mpl<OpaqueType<4>> λ(char*, ch…`."""
    heads: dict[str, set[str]] = {}
    for s in shorts:
        heads.setdefault(s.partition("<")[0], set()).add(s)
    eigen = {s for s in shorts if s.startswith("Eigen ")}
    bare = any(len(s) > width for s in eigen)  # one Eigen name cut: all lose "Eigen "
    fitted = [
        cut_left(s.removeprefix("Eigen "), width, sep=" ")
        if bare and s in eigen
        else fit_kernel(s, width, unique_function=len(heads[s.partition("<")[0]]) == 1)
        for s in shorts
    ]
    if width < 12:
        return fitted
    for _ in range(3):
        groups: dict[str, set[str]] = {}
        for f, s in zip(fitted, shorts, strict=True):
            groups.setdefault(f, set()).add(s)
        clashing = [i for i, f in enumerate(fitted) if len(groups[f]) > 1]
        if not clashing:
            break
        for i in clashing:
            s = shorts[i]
            differs = min(_common_prefix(s, o) for o in groups[fitted[i]] - {s})
            head = s[: min(8, width // 4)]
            room = width - len(head) - 2
            start = max(len(head), min(differs - room // 3, len(s) - room))
            tail = ELLIPSIS if start + room < len(s) else ""
            fitted[i] = head + ELLIPSIS + s[start : start + room + 1 - len(tail)] + tail
    return fitted


# -- nesting paths -------------------------------------------------------------------------
@dataclass
class Branch:
    """A node of the nested path tree: a label (one or more path components), the index of the
    name it ends (or None for a folder), and its children."""

    label: str
    index: int | None = None
    children: list[Branch] = field(default_factory=list)


def nest(names: Sequence[str], sep: str = "/") -> list[Branch]:
    """`a/runs/x`, `a/runs/y`, `b` → `a/runs/` {`x`, `y`}, `b`: shared heads once, chains joined.

    Order is that of the names' first appearance."""
    root = Branch("")
    for i, name in enumerate(names):
        node = root
        for piece in [p for p in name.split(sep) if p] or [name]:
            child = next((c for c in node.children if c.label == piece), None)
            if child is None:
                child = Branch(piece)
                node.children.append(child)
            node = child
        node.index = i

    def squash(b: Branch) -> Branch:
        while b.index is None and len(b.children) == 1:
            only = b.children[0]
            b = Branch(f"{b.label}{sep}{only.label}", only.index, only.children)
        b.children = [squash(c) for c in b.children]
        if b.children and not b.label.endswith(sep):
            b.label += sep
        return b

    return [squash(c) for c in root.children]
