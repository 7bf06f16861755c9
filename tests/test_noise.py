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
    burn = "import time\nt = time.time()\nwhile time.time() - t < 30: pass"
    burners = [subprocess.Popen([sys.executable, "-c", burn], start_new_session=True)
               for _ in range(2)]
time.sleep(1.0)
used = 0.0
for b in burners:  # what they used, from the kernel, before they are stopped
    with open(f"/proc/{b.pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    used += (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    b.kill()
    b.wait()
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
