"""A tiny, deterministic job for the Ray backend's tests: the same output, metrics and profile
file wherever it runs, so a cluster's record can be compared with a local one byte for byte.

JOB_SLEEP (seconds) keeps it running; JOB_TALLY (a directory) counts its starts per run id; JOB_GATE (a path) keeps it running until that file exists
(at most 10 minutes), so that a test can end it when it is ready rather than after a time that
a loaded machine may not keep. It reports what it saw of tuiprof's settings.
"""

import hashlib
import json
import os
import sys
import time

variant, repeat = os.environ["TUIPROF_VARIANT"], int(os.environ["TUIPROF_REPEAT"])
run_dir, metrics = os.environ["TUIPROF_RUN_DIR"], os.environ["TUIPROF_METRICS_FILE"]
if os.environ.get("JOB_TALLY"):  # a directory: each run that starts leaves a line there
    with open(os.path.join(os.environ["JOB_TALLY"], os.environ["TUIPROF_RUN_ID"]), "a") as t:
        t.write("started\n")
print(f"start {os.environ['TUIPROF_RUN_ID']} args={sys.argv[1:]}", flush=True)
print(f"run dir exists: {os.path.isdir(run_dir)}; metrics file exists: {os.path.isfile(metrics)}")
print(f"profiler port given: {bool(os.environ.get('TUIPROF_PROFILER_PORT'))}", flush=True)
with open(metrics, "a") as f:
    for epoch in range(2):
        f.write(json.dumps({"epoch": epoch, "epochs": 2, "loss": 1 / (epoch + 1 + repeat)}) + "\n")
    for i in range(5):
        f.write(json.dumps({"latency_ms": 10.0 + i + repeat}) + "\n")
    bonus = 0.05 if variant == "b" else 0.0
    f.write(
        json.dumps({"accuracy": 0.5 + 0.1 * repeat + bonus, "dataset_fingerprint": "d1"}) + "\n"
    )
session = os.path.join(run_dir, "plugins", "profile", "session")
os.makedirs(session, exist_ok=True)
with open(os.path.join(session, "host.xplane.pb"), "wb") as f:
    f.write(hashlib.sha256(f"{variant}{repeat}".encode()).digest() * 4096)
time.sleep(float(os.environ.get("JOB_SLEEP", "0")))
gate, waited = os.environ.get("JOB_GATE"), 0.0
while gate and not os.path.exists(gate) and waited < 600:
    time.sleep(0.05)
    waited += 0.05
print("end", file=sys.stderr, flush=True)
