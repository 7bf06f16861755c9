"""Noise named: a run measured while CPU burners ran beside it is recorded and flagged as run
under load, by the runner itself around real processes; the comparison's guard counts it and the
run table and `tuiprof run` say it beside the run."""

from __future__ import annotations

import sys
from pathlib import Path

from tui_prof.comparison.report import compare_experiment
from tui_prof.experiments.noise import LOADED_CORES, gpu_state, noise_reasons
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
