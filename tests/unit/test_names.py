"""Names a user can tell apart: kernels, op scopes and run paths shortened on real traces."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest
from conftest import GPU_LOGDIR, SHARED_TRACES, needs_shared
from rich.console import Console

from tui_prof.render.name_cells import TailCut
from tui_prof.render.names import (
    cut_left,
    cut_middle,
    fit_kernels,
    fit_paths,
    kernel_name,
    kernel_names,
    nest,
)

EIGEN_CONVERSION = (
    "void Eigen::internal::EigenMetaKernel<Eigen::TensorEvaluator<Eigen::TensorAssignOp<"
    "Eigen::TensorMap<Eigen::Tensor<Eigen::half, 1, 1, long>, 16, Eigen::MakePointer>, "
    "Eigen::TensorConversionOp<Eigen::half, Eigen::TensorMap<Eigen::Tensor<float const, 1, 1, "
    "long>, 16, Eigen::MakePointer> const> const> const, Eigen::GpuDevice>, long>("
    "Eigen::TensorEvaluator<Eigen::TensorAssignOp<Eigen::TensorMap<Eigen::Tensor<Eigen::half, 1, "
    "1, long>, 16, Eigen::MakePointer>, Eigen::TensorConversionOp<Eigen::half, Eigen::TensorMap<"
    "Eigen::Tensor<float const, 1, 1, long>, 16, Eigen::MakePointer> const> const> const, "
    "Eigen::GpuDevice>, long)"
)
TORCH_ADD = (
    "void at::native::vectorized_elementwise_kernel<4, at::native::AddFunctor<float>, "
    "at::detail::Array<char*, 3> >(int, at::native::AddFunctor<float>, at::detail::Array<char*, 3>)"
)
TORCH_ADD_2 = TORCH_ADD.replace("kernel<4,", "kernel<2,")
TORCH_NEG = (
    "void at::native::vectorized_elementwise_kernel<4, at::native::neg_kernel_cuda("
    "at::TensorIteratorBase&)::{lambda()#2}::operator()() const::{lambda()#7}::operator()() "
    "const::{lambda(float)#1}, at::detail::Array<char*, 2> >(int, at::native::neg_kernel_cuda("
    "at::TensorIteratorBase&)::{lambda()#2}::operator()() const::{lambda()#7}::operator()() "
    "const::{lambda(float)#1}, at::detail::Array<char*, 2>)"
)
CUTLASS = (
    "void cutlass::Kernel<cutlass_80_tensorop_s1688gemm_64x64_16x6_nn_align4>("
    "cutlass_80_tensorop_s1688gemm_64x64_16x6_nn_align4::Params)"
)


def test_kernel_names_drop_void_namespaces_parameters_and_plumbing() -> None:
    assert kernel_name(EIGEN_CONVERSION) == "Eigen half[1d] = half(float[1d])"
    assert kernel_name(TORCH_ADD) == "vectorized_elementwise_kernel<AddFunctor<float>>"
    assert kernel_name(CUTLASS) == "Kernel<cutlass_80_tensorop_s1688gemm_64x64_16x6_nn_align4>"
    assert kernel_name("ampere_sgemm_128x64_tn") == "ampere_sgemm_128x64_tn"
    assert kernel_name(TORCH_NEG) == "vectorized_elementwise_kernel<neg_kernel_cuda>"


def test_kernel_names_add_detail_only_where_two_would_read_the_same() -> None:
    shorts = kernel_names([TORCH_ADD, TORCH_ADD_2, TORCH_NEG, "ampere_sgemm_128x64_tn"])
    assert shorts[2:] == [
        "vectorized_elementwise_kernel<neg_kernel_cuda>",
        "ampere_sgemm_128x64_tn",
    ]
    assert shorts[0] != shorts[1]
    assert "<4, AddFunctor<float>" in shorts[0] and "<2, AddFunctor<float>" in shorts[1]
    # The same kernel twice (two launch shapes) stays one name: the caller adds the shape.
    assert kernel_names([TORCH_ADD, TORCH_ADD]) == [kernel_name(TORCH_ADD)] * 2


@pytest.mark.parametrize(
    "bad", ["", "   ", "void", "<<<", "f<int", "f(int", "a::::b", "void (*)(int)", "x" * 5000]
)
def test_odd_names_come_back_rather_than_raise(bad: str) -> None:
    assert isinstance(kernel_name(bad), str)
    assert len(kernel_names([bad, bad + "y"])) == 2
    assert all(len(f) <= 20 for f in fit_kernels(kernel_names([bad]), 20))


@needs_shared
def test_the_tf_profiles_eigen_kernels_read_as_distinct_expressions() -> None:
    """The 8-GPU profile's Kernels tab: 14 Eigen rows that all read `void Eigen::internal::EigenMe`
    (10 different kernels; 4 are one of them launched in other grids) become 10 expressions."""
    from tui_prof.profiles.discover import discover
    from tui_prof.profiles.load import load_summary

    kernels = load_summary(discover(GPU_LOGDIR).sessions[0]).kernels
    eigen = [k for k in kernels if "EigenMetaKernel" in k.name]
    # (each is also split by the TensorFlow op it ran for, read from the kernels' annotations)
    assert len({(k.name, k.grid) for k in eigen}) == 14 and len({k.name for k in eigen}) == 10
    assert any(k.op_name for k in eigen)
    shorts = kernel_names([k.name for k in kernels])
    short_eigen = [s for s, k in zip(shorts, kernels, strict=True) if "EigenMetaKernel" in k.name]
    assert len(set(short_eigen)) == 10
    assert all(s.startswith("Eigen ") and len(s) <= 45 for s in short_eigen)
    # Rows of one kernel differ in their launch shape, which the tables show beside the name.
    assert len({(k.name, k.grid) for k in eigen}) == 14
    for width in (24, 30, 40):
        fitted = fit_kernels(shorts, width)
        assert len(set(fitted)) == len(set(shorts)) and max(map(len, fitted)) <= width
    assert "half[1d] = half(float[1d])" in fit_kernels(shorts, 30)


def _kineto_kernel_names() -> list[str]:
    names: set[str] = set()
    for f in sorted((SHARED_TRACES / "kineto").glob("*.json.gz")):
        with gzip.open(f) as stream:
            events = json.load(stream)
        for e in events.get("traceEvents", []) if isinstance(events, dict) else events:
            if isinstance(e, dict) and e.get("cat") in ("kernel", "Kernel"):
                names.add(e["name"])
    return sorted(names)


@needs_shared
def test_pytorch_kernel_names_stay_distinct_and_get_shorter() -> None:
    names = _kineto_kernel_names()
    assert len(names) > 200
    shorts = kernel_names(names)
    assert len(set(shorts)) == len(names)
    assert all(len(s) <= len(n) for s, n in zip(shorts, names, strict=True))
    assert sum(len(s) for s in shorts) < 0.4 * sum(len(n) for n in names)
    assert not any(s.startswith("void ") for s in shorts if "(" not in s)
    assert len(set(fit_kernels(shorts, 60))) == len(names)


def test_op_scopes_keep_their_tail_and_what_tells_them_apart() -> None:
    op = "StatefulPartitionedCall/gradient_tape/sequential_1/dense_1/MatMul/MatMul_1"
    assert cut_left(op, 30) == "…/dense_1/MatMul/MatMul_1"
    assert cut_left(op, 200) == op
    a = "replica_4/bert/encoder/layer_12/self_attention/dropout_3/dropout/random_uniform/RandomUniform"
    b = a.replace("layer_12", "layer_22")
    fa, fb = fit_paths([a, b], 32)
    assert fa != fb and fa.endswith("/RandomUniform") and "layer_12" in fa and len(fa) <= 32


@needs_shared
def test_the_tf_profiles_top_ops_read_apart() -> None:
    from tui_prof.profiles.discover import discover
    from tui_prof.profiles.load import load_summary

    ops = [o.name for o in load_summary(discover(GPU_LOGDIR).sessions[0]).top_ops]
    assert len(ops) > 400  # every op of the profile, many of them scopes 10 deep
    top = fit_paths(ops[:50], 40)  # the rows a screen or two shows
    assert len(set(top)) == len(set(ops[:50]))  # an op on host and device: two rows, one name
    fitted = fit_paths(ops, 60)
    assert len(set(fitted)) == len(set(ops))
    for width, names in ((40, top), (60, fitted)):
        assert max(map(len, names)) <= width
    assert all(f.split("/")[-1] == o.split("/")[-1] for f, o in zip(fitted, ops, strict=True))


def test_cut_middle_and_tailcut_keep_to_their_width() -> None:
    assert cut_middle("abcdefghij", 5) == "ab…ij"
    assert cut_middle("abc", 5) == "abc"
    console = Console(width=20, color_system=None, record=True)
    console.print(TailCut("sample_traces/custom_loop/plugins/profile/2026_11_22"))
    assert console.export_text().strip() == "…/profile/2026_11_22"


def test_runs_nest_under_their_shared_head() -> None:
    runs = [
        "custom_loop",
        *(
            f"experiment_mixed_precision/runs/{v}-r{i}"
            for v in ("float32", "mixed")
            for i in (0, 1)
        ),
        "keras_fit_float32/train",
    ]
    tree = nest(runs)
    assert [b.label for b in tree] == [
        "custom_loop",
        "experiment_mixed_precision/runs/",
        "keras_fit_float32/train",
    ]
    group = tree[1]
    assert group.index is None
    assert [c.label for c in group.children] == ["float32-r0", "float32-r1", "mixed-r0", "mixed-r1"]
    assert [c.index for c in group.children] == [1, 2, 3, 4]
    assert tree[0].index == 0 and tree[2].index == 5


def test_a_run_inside_another_run_nests_under_it() -> None:
    tree = nest(["a", "a/b", "a/c"])
    assert [(b.label, b.index) for b in tree] == [("a/", 0)]
    assert [(c.label, c.index) for c in tree[0].children] == [("b", 1), ("c", 2)]


def test_samples_tree_paths(tmp_path: Path) -> None:
    assert [b.label for b in nest([])] == []
    assert [b.label for b in nest(["/abs/x"])] == ["abs/x"]


@needs_shared
def test_the_summary_kernel_table_keeps_different_kernels_apart_at_80_columns() -> None:
    """`tuiprof summary` at 80 columns: two `reduce_kernel<ReduceOp<float, …>>` rows of the MI250
    trace used to read `reduce_kernel<ReduceOp<fl…` both; the cell now fits each name by
    `fit_kernels`, moving the window to where they differ."""
    from tui_prof.profiles.discover import discover
    from tui_prof.profiles.load import load_summary
    from tui_prof.render.summary import kernels_table

    path = SHARED_TRACES / "kineto" / "mi250_minitoy_train.json.gz"
    s = load_summary(discover(path).sessions[0])
    console = Console(width=80, record=True, color_system=None)
    console.print(kernels_table(s, 10))
    rows = [
        line.split("│")[1].strip()
        for line in console.export_text().splitlines()
        if line.startswith("│")
    ]
    names = [k.name for k in s.kernels[:10]]
    assert len(rows) == len(names) and max(map(len, rows)) < 40
    different = {(a, b) for a in range(len(names)) for b in range(a) if names[a] != names[b]}
    assert different and all(rows[a] != rows[b] for a, b in different), rows


@needs_shared
def test_the_summary_kernel_table_tells_one_kernel_of_several_ops_apart_by_its_op() -> None:
    """The 8-GPU TensorFlow profile launches one Eigen cast and one Philox kernel from each
    replica and layer: the kernel names are the same, the ops tell the rows apart. At 120
    columns the op cell used to read `replica_4/bert_span_labeler/bert_enc…` on eight rows; it
    now keeps the scopes that differ (`…/layer_17/…/RandomUniform`)."""
    from tui_prof.profiles.load import summarize_session
    from tui_prof.render.summary import kernels_table

    s = summarize_session(GPU_LOGDIR / "plugins" / "profile" / "2020_demo")
    console = Console(width=120, record=True, color_system=None)
    console.print(kernels_table(s, 10))
    rows = [
        [cell.strip() for cell in line.split("│")[1:3]]
        for line in console.export_text().splitlines()
        if line.startswith("│")
    ]
    kernels = s.kernels[:10]
    assert len(rows) == len(kernels)
    assert len({k.name for k in kernels}) < len({(k.name, k.op_name) for k in kernels})
    seen = {(k.name, k.op_name): tuple(r) for k, r in zip(kernels, rows, strict=True)}
    assert len(set(seen.values())) == len(seen), rows
    assert all(op.endswith(("/Cast", "/RandomUniform")) for _, op in rows)
