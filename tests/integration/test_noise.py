"""Noise named: a run measured while CPU burners ran beside it is recorded and flagged as run
under load, by the runner itself around real processes; the comparison's guard counts it and the
run table and `tuiprof run` say it beside the run."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from tui_prof.comparison.report import compare_experiment
from tui_prof.experiments.noise import LOADED_CORES, gpu_state, noise_reasons, parse_rocm_smi
from tui_prof.experiments.runner import Runner
from tui_prof.experiments.spec import load_spec
from tui_prof.experiments.store import load_experiment
from tui_prof.model import RUN_FINISHED

JOB = r"""
import os, subprocess, sys, time
burners = []
if os.environ["TUIPROF_RUN_ID"] == "b-r0":  # two CPU burners, outside the job, during this run
    # Started by a launcher that exits at once, so they are not the job's children: a child the
    # job reaped would count in the job's own CPU time (wait4), not as another process's.
    burn = "import time\nt = time.time()\nwhile time.time() - t < 30: pass"
    launch = (
        "import subprocess, sys\n"
        f"ps = [subprocess.Popen([sys.executable, '-c', {burn!r}], start_new_session=True,"
        " stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)"
        " for _ in range(2)]\n"
        "print(' '.join(str(p.pid) for p in ps))"
    )
    out = subprocess.run([sys.executable, "-c", launch], capture_output=True, text=True).stdout
    burners = [int(p) for p in out.split()]
time.sleep(1.0)
used = 0.0
for pid in burners:  # what they used, from the kernel, before they are stopped
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    used += (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    os.kill(pid, 9)
if burners:
    with open(os.path.join(sys.argv[1], "burned.txt"), "w") as f:
        f.write(str(used))
"""


def test_a_run_beside_cpu_burners_is_recorded_and_flagged_as_loaded(tmp_path: Path) -> None:
    (tmp_path / "job.py").write_text(JOB, encoding="utf-8")
    spec = tmp_path / "tuiprof.toml"
    spec.write_text(
        f'name = "noise"\ncommand = ["{sys.executable}", "job.py", "{tmp_path}"]\nrepeats = 1\n'
        "[variants.a]\n[variants.b]\n",
        encoding="utf-8",
    )
    runner = Runner.create(load_spec(spec), tmp_path / "exp").start()
    assert runner.wait(60)
    exp = load_experiment(tmp_path / "exp")
    assert [r.status for r in exp.runs] == [RUN_FINISHED, RUN_FINISHED]
    loaded = next(r for r in exp.runs if r.run_id == "b-r0")
    state = loaded.environment["machine_state"]
    assert state["cpus"] and state["load_avg"] >= 0
    burned = float((tmp_path / "burned.txt").read_text())
    wall = loaded.wall_time_s or 0.0
    # The burners' CPU time is counted as other processes' (whatever else the machine did too);
    # the job's own sleep is not.
    assert state["others_cores"] * wall >= 0.9 * burned - 0.05, (state, burned, wall)
    if burned / wall >= LOADED_CORES + 0.05:  # they got the CPU they asked for: flagged
        reasons = noise_reasons(state)
        assert reasons and reasons[0].startswith("under load: other processes used")
        report = compare_experiment(exp)
        assert "b-r0" in dict(report.comparability.noisy)
        assert report.comparability.to_dict()["noisy_runs"]
        assert "measured under load or throttled" in report.comparability.noise_message


def test_noise_reasons_name_a_throttled_gpu_and_nothing_without_a_state() -> None:
    gpu = {"sm_clock_mhz": 1100.0, "sm_clock_max_mhz": 1980.0, "temperature_c": 88.0}
    state = {"others_cores": 0.0, "cpus": 2, "gpus": [{**gpu, "throttle": ["hw_thermal_slowdown"]}]}
    assert noise_reasons(state) == ["GPU 0 throttled (hw_thermal_slowdown)"]
    assert noise_reasons({"others_cores": 0.1, "gpus": [{**gpu, "throttle": []}]}) == []
    assert noise_reasons(None) == [] and noise_reasons({}) == []
    for g in gpu_state():  # where nvidia-smi answers (a GPU machine): its fields are read
        assert g["sm_clock_max_mhz"] and isinstance(g["throttle"], list)


def test_runs_under_load_ask_for_a_quiet_machine_not_more_repeats() -> None:
    """An unresolved time comparison whose runs mostly ran under load advises no repeats (they
    would measure the load); the same values measured quietly do ask for them."""
    from tui_prof.model import ExperimentRecord, RunRecord

    values = {"a": [1.0, 1.3, 0.9, 1.2, 1.1], "b": [1.2, 1.0, 1.25, 0.95, 1.15]}

    def experiment(state: dict[str, float]) -> ExperimentRecord:
        runs = tuple(
            RunRecord(
                run_id=f"{v}-r{i}", variant=v, repeat=i, status=RUN_FINISHED, wall_time_s=x,
                environment={"machine_state": state},
            )
            for i in range(5)
            for v, xs in values.items()
            for x in [xs[i]]
        )  # fmt: skip
        return ExperimentRecord("n", "/nowhere", "a", ("a", "b"), ("wall_time_s",), 5, runs)

    loaded = compare_experiment(experiment({"others_cores": 1.5, "cpus": 2}))
    (c,) = loaded.metric("wall_time_s").comparisons
    assert c.repeats_needed is None and c.winner is None
    assert c.verdict.endswith("10 of 10 runs were measured under load or throttled: quiet the "
                              "machine rather than add repeats")  # fmt: skip
    quiet = compare_experiment(experiment({"others_cores": 0.0, "cpus": 2}))
    (c,) = quiet.metric("wall_time_s").comparisons
    assert c.repeats_needed is not None and not quiet.comparability.noisy


# Real `rocm-smi --json` output, as posted by users (the fields shown, in their order; the
# firmware and identity lines that follow them left out):
# - an Instinct MI200 node, wandb/wandb pull request 5449 (github.com/wandb/wandb/pull/5449);
# - a Radeon 780M with rocm-smi-lib 6.2.4, sebhildebrandt/systeminformation pull request 960
#   (github.com/sebhildebrandt/systeminformation/pull/960);
# - an older rocm-smi (`-f -t -P --json`), lower-case "(c)" and no clocks, RainbowMiner issue 749
#   (github.com/RainbowMiner/RainbowMiner/issues/749), whole.
ROCM_MI200 = (
    '{"card0": {"GPU ID": "0x7408", "Unique ID": "0xa32343daf897162a", "VBIOS version": '
    '"113-D65201-046", "Temperature (Sensor edge) (C)": "56.0", "Temperature (Sensor junction) '
    '(C)": "61.0", "Temperature (Sensor memory) (C)": "65.0", "Temperature (Sensor HBM 0) (C)": '
    '"65.0", "Temperature (Sensor HBM 1) (C)": "63.0", "Temperature (Sensor HBM 2) (C)": "62.0", '
    '"Temperature (Sensor HBM 3) (C)": "63.0", "fclk clock speed:": "(0Mhz)", "fclk clock '
    'level:": "0", "mclk clock speed:": "(1600Mhz)", "mclk clock level:": "3", "sclk clock '
    'speed:": "(1700Mhz)", "sclk clock level:": "1", "socclk clock speed:": "(1090Mhz)", '
    '"socclk clock level:": "3", "Performance Level": "auto", "GPU OverDrive value (%)": "0", '
    '"GPU Memory OverDrive value (%)": "0", "Max Graphics Package Power (W)": "560.0", '
    '"Average Graphics Package Power (W)": "144.0", "GPU use (%)": "100"}}'
)
ROCM_780M = """{
    "card0": {
        "Device Name": "Phoenix3",
        "Device ID": "0x1900",
        "Device Rev": "0x01",
        "Subsystem ID": "0xe001",
        "GUID": "45560",
        "Unique ID": "N/A",
        "VBIOS version": "113-PHXGENERIC-001",
        "Temperature (Sensor edge) (C)": "31.0",
        "fclk clock speed:": "(400Mhz)",
        "fclk clock level:": "0",
        "mclk clock speed:": "(400Mhz)",
        "mclk clock level:": "0",
        "sclk clock speed:": "(800Mhz)",
        "sclk clock level:": "0",
        "socclk clock speed:": "(400Mhz)",
        "socclk clock level:": "0",
        "Performance Level": "auto",
        "Current Socket Graphics Package Power (W)": "7.222",
        "GPU use (%)": "19",
        "GPU Memory Allocated (VRAM%)": "87"
    }
}"""
ROCM_OLD = (
    '{"card0": {"Fan Speed (%)": "45", "Average Graphics Package Power (W)": "222.0", '
    '"Temperature (Sensor mem) (c)": "79.0", "Fan Speed (level)": "117", "Temperature (Sensor '
    'junction) (c)": "103.0", "Temperature (Sensor edge) (c)": "77.0"}}'
)


def test_rocm_smi_output_gives_each_amd_gpus_clock_and_temperature() -> None:
    assert parse_rocm_smi(ROCM_MI200) == [
        {"sm_clock_mhz": 1700.0, "temperature_c": 56.0, "perf_level": "auto"}
    ]
    assert parse_rocm_smi(ROCM_780M) == [
        {"sm_clock_mhz": 800.0, "temperature_c": 31.0, "perf_level": "auto"}
    ]
    assert parse_rocm_smi(ROCM_OLD) == [{"sm_clock_mhz": None, "temperature_c": 77.0}]
    two = f'{{"card1": {ROCM_780M[:-1].split(":", 1)[1]}, "card0": {ROCM_MI200[10:-1]}}}'
    assert [g["sm_clock_mhz"] for g in parse_rocm_smi(two)] == [1700.0, 800.0]  # card order
    for junk in ("", "ERROR: GPU[0] : No such file", "[1, 2]", '{"system": {}}', "{"):
        assert parse_rocm_smi(junk) == []
    # No throttle reasons are read from rocm-smi, so an AMD GPU never makes a run "throttled".
    assert noise_reasons({"gpus": parse_rocm_smi(ROCM_MI200)}) == []


def test_without_nvidia_smi_the_gpus_are_read_from_rocm_smi(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The call itself: rocm-smi found on PATH, its arguments, its output parsed. The program
    here prints the MI200's real output (no AMD GPU on the test machines)."""
    exe = tmp_path / "rocm-smi"
    exe.write_text(
        f"#!{sys.executable}\nimport sys\n"
        "assert sys.argv[1:] == ['--showtemp', '--showclocks', '--showperflevel', '--json']\n"
        f"print({ROCM_MI200!r})\n"
    )
    exe.chmod(0o755)
    monkeypatch.setenv("PATH", str(tmp_path))
    assert gpu_state() == parse_rocm_smi(ROCM_MI200) != []
    exe.unlink()
    assert gpu_state() == []
