"""Snakemake itself killed mid-run: no job outlives it, a second run on the same files
refuses while it runs, and the next plain run clears the stale locks, resumes, and recomputes no
finished job."""

from __future__ import annotations

import json
import os
import re
import signal
import time
from pathlib import Path

import psutil
import pytest

from contrastlab.workflow.recovery import runs_folder
from tests.workflow.helpers import alive, wait_for

from .conftest import macl_pair, run_snakemake, snakemake_process, start_snakemake, write

pytestmark = pytest.mark.slow
SCHEDULE_FIRST = 13  # a long module: tests/conftest.py starts the highest numbers first


@pytest.mark.fault(
    "SIGKILL of Snakemake mid-training; a 2nd Snakemake on the same results meanwhile",
    "2nd refused; no orphan; the same command resumes, nothing finished recomputed",
)
@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="needs Linux /proc to find the jobs")
def test_sigkill_of_snakemake_leaves_no_orphan_and_a_plain_rerun_resumes(
    repo_root, tmp_path, e2e_resources, observed
):
    # At one core the first cell trains to its end (no result exists before it ends), the second is
    # killed after its first snapshot with over 100 steps (seconds) to go.
    config = macl_pair(repo_root, tmp_path, e2e_resources)
    steps = 120
    config["training"].update(max_steps=steps, eval_every=60, state_every=5, log_every=10)
    configfile = write(config, tmp_path / "c.yaml")
    results = tmp_path / "results"
    profile = ["--workflow-profile", "profiles/default", "--cores", "1", "--configfile", configfile]
    first_output = tmp_path / "first.out"  # read back only to explain a failure
    workflow = start_snakemake(repo_root, profile, first_output)
    lock_dir = repo_root / ".snakemake" / "locks"
    try:
        # A second Snakemake on the same files while the first runs: the first's record refuses it before
        # it plans anything (contrastlab.workflow.recovery.live_run_refusal).
        wait_for(lambda: list(runs_folder(results).glob("*.json")), 240, "the workflow to start")
        second = snakemake_process(repo_root, *profile)
        assert second.returncode != 0
        refused = f"is in use by another run on this host (pid {workflow.pid}, started as "
        assert refused in second.stdout + second.stderr, (second.stdout + second.stderr)[-2000:]

        # Kill as soon as a training job is past a snapshot (its state folder exists only while it trains)
        # and some other job has finished (a trained checkpoint or a metrics file).
        def finished_results():
            return [*results.rglob("train_log.jsonl"), *results.rglob("senteval.json")]

        def training_after_a_finished_job():
            # a finished cell's snapshots outlive its published model for an instant: not a training one
            snapshots = [
                snapshot
                for snapshot in (results / "state" / "train").rglob("*.pt")
                if not (results / "checkpoints" / cell_of(snapshot) / "model").exists()
            ]
            return snapshots if snapshots and finished_results() else None

        def cell_of(snapshot: Path) -> Path:
            return Path(*snapshot.relative_to(results / "state" / "train").parts[:4])

        snapshot = wait_for(training_after_a_finished_job, 300, "a snapshot after a finished job")[0]
        killed_cell = cell_of(snapshot)
        jobs = [child.pid for child in psutil.Process(workflow.pid).children()]
        assert jobs, "no job process found under Snakemake"
        finished = {p: p.stat().st_mtime_ns for p in finished_results()}
        assert finished
        held = sorted(lock_dir.glob("*.lock"))
        assert workflow.poll() is None and held, (
            f"the first Snakemake should be running and hold its locks at the kill: exit status "
            f"{workflow.poll()}, locks {held}\n{first_output.read_text()[-3000:]}"
        )
        workflow.send_signal(signal.SIGKILL)
        workflow.wait(timeout=30)
        killed_at = time.monotonic()
        # The jobs notice within a second or two; an orphan would still be training (seconds per cell).
        wait_for(lambda: not any(alive(pid) for pid in jobs), 4, "the orphaned jobs to exit")
        time.sleep(max(0.0, killed_at + 10 - time.monotonic()))
        assert not (results / "checkpoints" / killed_cell / "model").exists(), "an orphan finished the cell"
    finally:
        if workflow.poll() is None:
            os.killpg(workflow.pid, signal.SIGKILL)

    left = sorted(lock_dir.glob("*.lock"))
    assert left == held, f"the kill should leave the locks held at the kill ({held}), found {left}"
    output = run_snakemake(repo_root, *profile)  # the same command again: nothing else to type
    assert f"contrastlab: a run on {results} (pid {workflow.pid}) was killed" in output, output[-3000:]
    assert (results / "report.md").is_file()
    for path, mtime in finished.items():
        assert path.stat().st_mtime_ns == mtime, f"{path} was recomputed"
    records = [
        json.loads(line) for line in (results / "checkpoints" / killed_cell / "train_log.jsonl").open()
    ]
    events = [r["event"] for r in records]
    assert "resume" in events and records[-1]["event"] == "end" and records[-1]["steps"] == steps, events
    observed(
        f"2nd run: lock refused; {len(jobs)} job(s) exited with Snakemake; rerun cleared the locks, resumed "
        f"{killed_cell} from step {next(r['step'] for r in records if r['event'] == 'resume')}, "
        f"{len(finished)} finished result(s) untouched"
    )


@pytest.mark.fault(
    "NaN loss in one cell of a --keep-going run",
    "that cell fails naming step, loss and stats; the others finish; the table says failed",
)
def test_a_diverging_cell_fails_alone_and_the_table_says_failed(repo_root, tmp_path, e2e_resources, observed):
    """A cell whose loss turns NaN fails with one contrastlab: line naming the step, the loss and its
    statistics, and a failed.json holding that line; --keep-going finishes the other cell, and a partial
    table says "failed" in the diverged cell's row and shows numbers in the other's."""
    config = macl_pair(repo_root, tmp_path, e2e_resources, lr=1.0e12)  # NaN within 2 steps
    configfile = write(config, tmp_path / "c.yaml")
    # Two jobs at a time (each single-threaded, resources.threads = 1): the two cells train side by side.
    profile = ["--workflow-profile", "profiles/default", "--cores", "2", "--configfile", configfile]
    done = snakemake_process(repo_root, *profile)  # the profile sets keep-going
    out = done.stdout + done.stderr
    lines = [line for line in out.splitlines() if line.startswith("contrastlab:")]
    # One line, printed by the job and again as the output's last line.
    assert done.returncode == 1 and len(set(lines)) == 1, out[-3000:]
    assert [line for line in done.stderr.splitlines() if line.strip()][-1] == lines[0], out[-3000:]
    assert lines[0].startswith("contrastlab: rule train macl/tiny-bert/macl/seed42: NonFiniteLossError")
    assert "not finite at step" in lines[0] and "loss stats at step" in lines[0], lines[0]
    metrics = tmp_path / "results" / "metrics" / "macl" / "tiny-bert"
    assert (metrics / "simcse" / "seed42" / "senteval.json").is_file()
    record = json.loads((metrics / "macl" / "seed42" / "failed.json").read_text())
    assert record["error"] == lines[0]

    run_snakemake(repo_root, *profile, "--config", "tables={partial: true}")
    table = (tmp_path / "results" / "tables" / "macl_tableB4.md").read_text()
    rows = table.splitlines()
    ours_from = next(i for i, row in enumerate(rows) if row.startswith("| tiny-bert | "))  # our backbone's
    ours = {  # method -> our row (the one after the paper's)
        rows[i].split(" | ")[1]: rows[i + 1] for i in range(ours_from, len(rows)) if " | paper | " in rows[i]
    }
    assert ours["w/ MACL"].endswith("| failed | failed | failed |"), ours["w/ MACL"]
    assert re.search(r"\| \d+\.\d\d \| \d+\.\d\d \| \d+\.\d\d \|$", ours["SimCSE"]), ours["SimCSE"]
    observed(lines[0].split(": ", 2)[2][:110] + "; simcse finished; table: failed")
