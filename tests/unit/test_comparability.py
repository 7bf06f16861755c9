"""The apples-to-apples guard on run records shaped like the runner's fingerprints."""

from __future__ import annotations

from typing import Any

from tui_prof.comparison.comparability import NOT_REPORTED, check_comparability, intentional_fields
from tui_prof.experiments.fingerprint import host_fingerprint, run_fingerprint
from tui_prof.model import RUN_FINISHED, RunRecord


def env(**over: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "host": "gpu-box-1",
        "platform": "Linux-6.8",
        "cpu_model": "AMD EPYC 7543",
        "cpu_count": 32,
        "python_version": "3.11.9",
        "python_executable": "/venv/bin/python",
        "framework_versions": {"tensorflow": "2.21.0", "keras": "3.12.0"},
        "gpu_model": "NVIDIA H100 80GB HBM3",
        "gpu_count": 1,
        "gpu_driver": "550.54.15",
        "gpu_memory": "81559 MiB",
        "cuda_version": "12.4",
        "dataset_fingerprint": "sha256:ab12",
        "epochs": 5,
        "batch_size": 128,
        "precision_policy": "float32",
    }
    base.update(over)
    return base


def run(variant: str, repeat: int, **over: Any) -> RunRecord:
    return RunRecord(
        run_id=f"{variant}-r{repeat}",
        variant=variant,
        repeat=repeat,
        status=RUN_FINISHED,
        environment=env(**over),
        metrics={"wall_time_s": 10.0},
    )


def test_identical_environments_are_comparable_and_list_what_was_checked() -> None:
    runs = [
        run(v, i, precision_policy=p)
        for v, p in (("fp32", "float32"), ("mixed", "mixed_float16"))
        for i in range(3)
    ]
    c = check_comparability(runs)
    assert c.ok and c.differences == ()  # precision policy is what the variants change
    assert "gpu_model" in c.checked and "framework_versions.tensorflow" in c.checked
    assert "precision_policy" not in c.checked and c.runs == 6


def test_gpu_model_confounded_with_the_variant_is_named_with_its_runs() -> None:
    runs = [run("fp32", i) for i in range(2)] + [
        run("mixed", i, gpu_model="NVIDIA A100-SXM4-40GB") for i in range(2)
    ]
    c = check_comparability(runs)
    assert not c.ok
    (d,) = c.differences
    assert d.field == "gpu_model" and d.scope == "between variants" and not d.intentional
    assert dict(d.values) == {
        "NVIDIA H100 80GB HBM3": ("fp32-r0", "fp32-r1"),
        "NVIDIA A100-SXM4-40GB": ("mixed-r0", "mixed-r1"),
    }
    assert d.message == (
        "GPU model differs between variants: 'NVIDIA H100 80GB HBM3' in all 2 fp32 runs; "
        "'NVIDIA A100-SXM4-40GB' in all 2 mixed runs"
    )
    as_json = c.to_dict()
    assert as_json["ok"] is False
    assert as_json["differences"][0]["values"][1] == {
        "value": "NVIDIA A100-SXM4-40GB",
        "runs": ["mixed-r0", "mixed-r1"],
    }


def test_several_fields_within_variants_and_missing_reports() -> None:
    runs = [
        run("a", 0),
        run(
            "a", 1, host="gpu-box-2", framework_versions={"tensorflow": "2.20.0", "keras": "3.12.0"}
        ),
        run("b", 0, dataset_fingerprint=None),
        run("b", 1, epochs=3),
    ]
    c = check_comparability(runs)
    fields = [d.field for d in c.differences]
    # Reported in CHECKED_FIELDS order: versions, dataset, epochs, host.
    assert fields == ["framework_versions.tensorflow", "dataset_fingerprint", "epochs", "host"]
    by = {d.field: d for d in c.differences}
    assert dict(by["dataset_fingerprint"].values)[NOT_REPORTED] == ("b-r0",)
    assert (
        by["epochs"].message
        == "epochs differs within variants: '5' in all 2 a runs, b-r0; '3' in b-r1"
    )
    assert dict(by["epochs"].values) == {"5": ("a-r0", "a-r1", "b-r0"), "3": ("b-r1",)}
    assert all(d.scope == "within variants" for d in c.differences)
    assert by["framework_versions.tensorflow"].label == "tensorflow version"


def test_fields_nobody_reports_are_not_differences() -> None:
    runs = [run("a", i, gpu_model=None, gpu_driver=None, cuda_version=None) for i in range(3)]
    c = check_comparability(runs)
    assert c.ok and "gpu_model" not in c.checked


def test_metrics_supply_epochs_and_batch_size_when_the_environment_lacks_them() -> None:
    a = RunRecord("a-r0", "a", 0, RUN_FINISHED, metrics={"batch_size": 64.0})
    b = RunRecord("b-r0", "b", 0, RUN_FINISHED, metrics={"batch_size": 128.0})
    c = check_comparability([a, b])
    assert [(d.field, dict(d.values)) for d in c.differences] == [
        ("batch_size", {"64": ("a-r0",), "128": ("b-r0",)})
    ]


def test_intentional_differences_are_reported_but_do_not_fail_the_check() -> None:
    variants: dict[str, tuple[list[str], dict[str, str]]] = {
        "bs64": (["--batch-size", "64"], {}),
        "bs128": (["--batch-size", "128"], {}),
    }
    intended = intentional_fields(variants)
    assert intended == {"batch_size"}
    runs = [run("bs64", i, batch_size=64) for i in range(2)] + [
        run("bs128", i, batch_size=128) for i in range(2)
    ]
    c = check_comparability(runs, intentional=intended)
    assert c.ok and len(c.differences) == 1 and c.differences[0].intentional
    assert "(intended by the variants)" in c.differences[0].message
    # A difference within a variant is never excused, even for an intended field.
    noisy = [*runs, run("bs64", 2, batch_size=32)]
    assert not check_comparability(noisy, intentional=intended).ok


def test_intentional_fields_ignore_unrelated_arguments() -> None:
    assert intentional_fields({"mixed": (["--precision", "mixed_float16"], {"TF_X": "1"})}) == set()
    assert intentional_fields({"short": ([], {"EPOCHS": "2"})}) == {"epochs"}


def test_real_fingerprints_from_this_machine_are_comparable() -> None:
    host = host_fingerprint()
    reported = {"dataset_fingerprint": "abc", "epochs": 2, "batch_size": 32}
    runs = [
        RunRecord(f"{v}-r{i}", v, i, RUN_FINISHED, environment=run_fingerprint(host, reported))
        for v in ("a", "b")
        for i in range(2)
    ]
    c = check_comparability(runs)
    assert c.ok
    assert {"host", "cpu_model", "python_version", "dataset_fingerprint", "epochs"} <= set(
        c.checked
    )
