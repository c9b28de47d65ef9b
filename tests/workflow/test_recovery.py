"""contrastlab.workflow.recovery without Snakemake: the running-workflow marker and what the recovery of a
killed run removes (the kill itself, Snakemake and its jobs: tests/e2e/test_recovery.py)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from types import SimpleNamespace

from contrastlab.workflow.recovery import (
    forget_running_workflow,
    record_running_workflow,
    recover_killed_run,
    running_workflow_marker,
    workflow_run,
)


def test_the_marker_names_this_process_until_it_is_forgotten(tmp_path):
    results = str(tmp_path / "results")
    job = SimpleNamespace(config={"results_dir": results})
    assert workflow_run(job) is None  # no run recorded
    record_running_workflow(results)
    owner = json.loads(running_workflow_marker(results).read_text())
    assert owner["pid"] == os.getpid() and workflow_run(job) == f"{os.getpid()}:{owner['start_time']}"
    assert recover_killed_run(results, tmp_path) is None  # alive: left alone
    assert running_workflow_marker(results).is_file()
    forget_running_workflow(results)
    assert workflow_run(job) is None and recover_killed_run(results, tmp_path) is None


def test_a_killed_runs_locks_on_its_results_go_and_other_runs_locks_stay(tmp_path):
    results = tmp_path / "results"
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()  # a pid that no longer runs (its start time cannot match)
    running_workflow_marker(results).parent.mkdir(parents=True)
    running_workflow_marker(results).write_text(json.dumps({"pid": dead.pid, "start_time": "1"}))
    locks = tmp_path / ".snakemake" / "locks"
    locks.mkdir(parents=True)
    (locks / "0.input.lock").write_text(f"{results}/metrics/a.json\n{results}/tables/t.csv\n")
    (locks / "0.output.lock").write_text(f"{results}\n")
    (locks / "1.output.lock").write_text(f"{tmp_path}/results-other/metrics/a.json\n")  # another run's

    note = recover_killed_run(str(results), tmp_path)

    assert note == (
        f"contrastlab: the last run on {results} (pid {dead.pid}) was killed; removed its 2 stale lock "
        "file(s), its incomplete jobs will be rerun"
    )
    assert sorted(p.name for p in locks.iterdir()) == ["1.output.lock"]
    assert not running_workflow_marker(results).exists()
    assert recover_killed_run(str(results), tmp_path) is None  # nothing left to recover
