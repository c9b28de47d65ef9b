"""contrastlab.workflow.recovery without Snakemake: each run's record, and what the recovery of a killed run
removes and leaves; a live run's locks are never taken for a dead one's (with Snakemake:
tests/e2e/test_recovery.py)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from contrastlab.paths import snakemake_record, write_json
from contrastlab.workflow import recovery
from contrastlab.workflow.recovery import (
    RUN_VARIABLE,
    forget_running_workflow,
    record_running_workflow,
    recover_killed_run,
    runs_folder,
    this_machine,
    workflow_run,
)
from tests.workflow.helpers import lock


def _record(results: Path, name: str, **fields) -> Path:
    """A run record on ``results``: of this machine (:func:`this_machine`) but where ``fields`` say."""
    path = runs_folder(results) / f"{name}.json"
    write_json(path, {**this_machine(), **fields})
    return path


def _ended_pid() -> int:
    ended = subprocess.Popen([sys.executable, "-c", "pass"])
    ended.wait()
    return ended.pid  # a pid that no longer runs (its start time cannot match)


def test_a_run_records_where_it_runs_its_process_and_its_own_locks(tmp_path, monkeypatch):
    monkeypatch.delenv(RUN_VARIABLE, raising=False)
    results = tmp_path / "results"
    assert workflow_run() is None  # no run recorded
    own = lock(tmp_path / ".snakemake" / "locks", "0.output.lock", f"{results}/metrics/a.json")
    path = record_running_workflow(results, [own], tmp_path)

    record = json.loads(path.read_text())
    assert path.parent == runs_folder(results)
    assert {k: record[k] for k in ("host", "boot_id", "pid_namespace")} == this_machine()
    assert record["pid"] == os.getpid() and record["start_time"] == recovery._start_time(os.getpid())
    assert record["locks"] == [recovery._digest(own)] and record["results_dir"] == str(results)
    (entry,) = (tmp_path / ".snakemake" / "contrastlab-runs").iterdir()  # the checkout lists it
    assert json.loads(entry.read_text()) == {"record": str(path)}
    assert workflow_run() == f"{record['host']}:{os.getpid()}:{record['start_time']}"
    assert recover_killed_run(str(results), tmp_path) == []  # alive, here: left alone
    assert path.is_file() and own.is_file()

    other = _record(results, "another-run", pid=os.getpid(), start_time="1", locks=[])
    forget_running_workflow(results, [own], tmp_path)
    assert not path.exists() and other.is_file() and not own.exists()  # only its own record goes
    assert not entry.exists()


@pytest.mark.fault(
    "run A alive, run B on the same results killed, then a third run (reliability P5)",
    "B's locks and record removed, and a lock no run claims; A's locks and record untouched",
)
def test_recovery_removes_only_the_dead_runs_own_locks_never_a_live_runs(tmp_path, observed):
    results, locks = tmp_path / "results", tmp_path / ".snakemake" / "locks"
    live = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        live_start = recovery._start_time(live.pid)
        a_in = lock(locks, "0.input.lock", f"{results}/data/corpus.txt")
        a_out = lock(locks, "0.output.lock", f"{results}/checkpoints/a/model")
        b_out = lock(locks, "1.output.lock", f"{results}/metrics/b/senteval.json")
        unclaimed = lock(locks, "2.output.lock", f"{tmp_path}/results-other/metrics/c.json")  # no record
        digests = {p: recovery._digest(p) for p in (a_in, a_out, b_out)}
        run_a = _record(
            results, "a", pid=live.pid, start_time=live_start, locks=[digests[a_in], digests[a_out]]
        )
        dead = _ended_pid()
        run_b = _record(results, "b", pid=dead, start_time=live_start, locks=[digests[b_out]])

        notes = recover_killed_run(str(results), tmp_path)

        assert notes == [
            f"contrastlab: a run on {results} (pid {dead}) was killed; removed its 1 stale lock file(s), its "
            "incomplete jobs will be rerun",
            f"contrastlab: removed 1 lock file(s) in {locks} that no live run claims (2.output.lock: left by "
            "runs that ended or were killed together)",
        ]
        assert sorted(p.name for p in locks.iterdir()) == ["0.input.lock", "0.output.lock"]
        assert run_a.is_file() and not run_b.exists() and not unclaimed.exists()
        assert recover_killed_run(str(results), tmp_path) == []  # nothing left to recover
        observed(notes[0])
    finally:
        live.kill()
        live.wait()


@pytest.mark.parametrize(
    "where",
    [{"pid_namespace": "pid:[1]"}, {"host": "login2"}, {"host": "login2", "boot_id": "another-boot"}],
    ids=["another-pid-namespace", "another-host", "another-host-and-boot"],
)
@pytest.mark.fault(
    "a record from a run that cannot be checked here: another host or PID namespace (reliability P4)",
    "named in one line with the record and the fix; its locks and record untouched",
)
def test_a_run_that_cannot_be_checked_here_is_named_and_its_locks_stay(tmp_path, where, observed):
    results, locks = tmp_path / "results", tmp_path / ".snakemake" / "locks"
    held = lock(locks, "0.output.lock", f"{results}/checkpoints/a/model")
    # Its pid does not run here: the very case where a pid-only check called a live remote run killed.
    path = _record(
        results, "remote", **where, pid=_ended_pid(), start_time="7", locks=[recovery._digest(held)]
    )

    (note,) = recover_killed_run(str(results), tmp_path)

    assert note.startswith(f"contrastlab: {results} may be in use by a run on "), note
    assert f"delete {path} and run this command once with --unlock" in note
    assert "\n" not in note and held.is_file() and path.is_file()
    observed(note)


@pytest.mark.fault(
    "a run's record left on this host before it rebooted (the record's boot id is not this boot's) (R3)",
    "recognised as ended in one line; its locks and record removed, so the run needs no --unlock",
)
def test_a_record_of_this_host_from_before_a_reboot_is_cleared_in_one_line(tmp_path, observed):
    results, locks = tmp_path / "results", tmp_path / ".snakemake" / "locks"
    held = lock(locks, "0.output.lock", f"{results}/checkpoints/a/model")
    machine = {"boot_id": "a-boot-before-the-restart"}
    # its pid lives now (this process), as a pid of the earlier boot may: the boot id decides, not the pid
    start = recovery._start_time(os.getpid())
    path = _record(
        results, "before", **machine, pid=os.getpid(), start_time=start, locks=[recovery._digest(held)]
    )

    notes = recover_killed_run(str(results), tmp_path)

    assert notes == [
        f"contrastlab: a run on {results} (pid {os.getpid()}) ended when this host restarted (its record is "
        "of another boot); removed its 1 stale lock file(s), its incomplete jobs will be rerun"
    ]
    assert not held.exists() and not path.exists() and recovery.live_run_refusal(str(results)) is None
    observed(notes[0])


def test_a_record_of_an_older_contrastlab_is_named_not_trusted(tmp_path):
    results, locks = tmp_path / "results", tmp_path / ".snakemake" / "locks"
    held = lock(locks, "0.output.lock", f"{results}")
    legacy = results / "state" / "snakemake.json"
    write_json(legacy, {"pid": _ended_pid(), "start_time": "1", "command": []})
    (notes,) = recover_killed_run(str(results), tmp_path)
    assert "recorded by an older contrastlab" in notes and f"delete {legacy}" in notes
    assert held.is_file() and legacy.is_file()


@pytest.mark.fault(
    "a run ends (Snakemake removes all of .snakemake/locks) while another run holds locks",
    "the other run's locks are back when the ending process exits; its own stay gone",
)
def test_a_run_that_ends_gives_back_the_locks_of_the_runs_still_going(tmp_path, observed):
    locks = tmp_path / ".snakemake" / "locks"
    own = lock(locks, "0.output.lock", "results/b.json")
    other = lock(locks, "1.output.lock", "results/a/model")
    other_input = lock(locks, "0.input.lock", "results/a/corpus.txt")
    # The ending run: forgets itself, then Snakemake's unlock removes the whole folder, then it exits.
    ending = textwrap.dedent(
        f"""
        import shutil
        from contrastlab.workflow.recovery import forget_running_workflow
        forget_running_workflow({str(tmp_path / "results")!r}, [{str(own)!r}], {str(tmp_path)!r})
        shutil.rmtree({str(locks)!r})
        """
    )
    subprocess.run([sys.executable, "-c", ending], check=True)
    assert sorted(p.name for p in locks.iterdir()) == ["0.input.lock", "1.output.lock"]
    assert other.read_text() == "results/a/model\n" and other_input.read_text() == "results/a/corpus.txt\n"
    observed("after the ending run exited: " + ", ".join(sorted(p.name for p in locks.iterdir())))


def test_a_dead_runs_locks_go_by_content_each_claim_once(tmp_path):
    """A killed run's record claims one lock of content X: of two files holding X exactly one goes (the first
    by name), and a file of other content stays."""
    locks = tmp_path / "locks"
    first = lock(locks, "0.output.lock", "results/a/model")
    twin = lock(locks, "1.output.lock", "results/a/model")
    other = lock(locks, "2.output.lock", "results/b/model")
    assert recovery._remove_locks(locks, [recovery._digest(first)]) == 1
    assert sorted(p.name for p in locks.iterdir()) == ["1.output.lock", "2.output.lock"]
    assert twin.read_text() == "results/a/model\n" and other.is_file()
    assert recovery._remove_locks(locks, ["0" * 64]) == 0  # a digest no file has: nothing


def test_locks_written_back_only_for_live_owners_under_a_free_name(tmp_path):
    """A run that ends writes back another run's lock under the next free name where its name was taken,
    never twice, never for an owner whose record is gone, and one no record claimed yet."""
    locks = tmp_path / "locks"
    lock(locks, "0.output.lock", "results/taken")  # written by a run that started meanwhile
    live = _record(
        tmp_path / "results", "live", pid=os.getpid(), start_time=recovery._start_time(os.getpid())
    )
    gone = tmp_path / "results" / "state" / "runs" / "gone.json"  # its run ended: record removed
    recovery._restore_locks(
        locks,
        {
            "0.output.lock": b"results/a\n",
            "1.input.lock": b"results/b\n",
            "2.output.lock": b"results/taken\n",
            "3.input.lock": b"results/c\n",
        },
        {"0.output.lock": live, "1.input.lock": gone, "2.output.lock": None, "3.input.lock": None},
    )
    assert {p.name: p.read_text() for p in sorted(locks.iterdir())} == {
        "0.output.lock": "results/taken\n",
        "1.output.lock": "results/a\n",
        "3.input.lock": "results/c\n",
    }


def _squeue(tmp_path: Path, monkeypatch, script: str) -> None:
    """A stand-in ``squeue`` first on PATH, running ``script`` (sh)."""
    (tmp_path / "bin").mkdir(exist_ok=True)
    (tmp_path / "bin" / "squeue").write_text(f"#!/bin/sh\n{script}\n")
    (tmp_path / "bin" / "squeue").chmod(0o755)
    monkeypatch.setenv("PATH", f"{tmp_path / 'bin'}{os.pathsep}{os.environ['PATH']}")


@pytest.mark.fault(
    "a SLURM run's Snakemake is SIGKILLed while its training job runs; the same command again",
    "refused in one line naming the running job and the fix, record and locks kept; recovered once it ended",
)
def test_a_rerun_waits_for_the_slurm_jobs_of_a_killed_run(tmp_path, monkeypatch, observed):
    results, locks = tmp_path / "results", tmp_path / ".snakemake" / "locks"
    held = lock(locks, "0.output.lock", f"{results}/checkpoints/a/model")
    record = {**this_machine(), "pid": _ended_pid(), "start_time": "7", "locks": [recovery._digest(held)]}
    path = _record(results, recovery._record_path(results, recovery._run_id(record)).stem, **record)
    label, other = "rule train nie2023/tiny-bert/cl/seed42", "rule train nie2023/tiny-bert/dcl/seed42"
    output = f"{results}/checkpoints/nie2023/tiny-bert/dcl/seed42/model"
    monkeypatch.setenv(RUN_VARIABLE, recovery._run_id(record))
    monkeypatch.setenv("SLURM_JOB_ID", "12345")
    with recovery.slurm_job_noted(results, other, [output]):  # noted while it runs, then its outputs
        (ended,) = path.with_suffix(".slurm").glob("12345.*.json")
        assert json.loads(ended.read_text()) == {"job": other}
    assert json.loads(ended.read_text()) == {"job": other, "ended": [output]}
    killed = recovery.slurm_job_noted(results, label)  # its group's other job, killed with its controller
    killed.__enter__()

    _squeue(tmp_path, monkeypatch, 'echo "$@" > "$(dirname "$0")/asked"; echo 12345')
    with pytest.raises(SystemExit) as refused:
        recover_killed_run(str(results), tmp_path)
    assert str(refused.value) == (
        f"contrastlab: 1 SLURM job(s) of a killed run on {results} still queued or running (12345: {label}); "
        "wait for it to end (squeue -j 12345) or cancel it (scancel 12345), then run this command again"
    )
    assert (tmp_path / "bin" / "asked").read_text().split() == ["-h", "-o", "%i", "-j", "12345"]
    assert held.is_file() and path.is_file()  # asked again next time
    observed(str(refused.value))
    _squeue(
        tmp_path, monkeypatch, "echo 'slurm_load_jobs error: Unable to contact slurm controller' >&2; exit 1"
    )
    with pytest.raises(SystemExit, match=r"squeue cannot say whether they still run \(slurm_load_jobs error"):
        recover_killed_run(str(results), tmp_path)

    _squeue(tmp_path, monkeypatch, "exit 0")  # it ended: recovered as before
    (note,) = recover_killed_run(str(results), tmp_path)
    assert "was killed; removed its 1 stale lock file(s)" in note and not path.with_suffix(".slurm").exists()
    assert note.endswith("will be rerun (and 1 SLURM job(s) it did not record)") and _marked(tmp_path, output)
    with pytest.raises(SystemExit, match="was killed and a later run took over"):  # was queued, starts now
        recovery.slurm_job_noted(results, label).__enter__()


def _marked(workdir: Path, key: str) -> bool:
    """Whether Snakemake's own reading of ``workdir/.snakemake/incomplete`` finds ``key`` marked."""
    from snakemake.persistence.file import FilePersistence

    persistence = FilePersistence.__new__(FilePersistence)  # only its markers: no DAG, no workflow
    persistence._max_len, persistence._incomplete_cache = None, None
    persistence._incomplete_path = str(workdir / ".snakemake" / "incomplete")
    return persistence._filter_incomplete_keys([key]) == {key}


@pytest.mark.fault(
    "under SLURM a job ended and cleared its incomplete mark, and its Snakemake was SIGKILLed before it "
    "recorded the outputs; the same command again",
    "its outputs are marked incomplete again, so the job reruns (a training job only re-exports) and is "
    "recorded; a job Snakemake recorded, or one still running, is not marked",
)
def test_a_slurm_job_that_ended_unrecorded_runs_again(tmp_path, observed):
    notes = tmp_path / "results" / "state" / "runs" / "run.slurm"
    write_json(notes / "1.aa.json", {"job": "rule train a", "ended": ["results/a/model", "results/a/log"]})
    write_json(notes / "1.bb.json", {"job": "rule train b", "ended": ["results/b/model"]})
    write_json(notes / "2.cc.json", {"job": "rule train c"})  # still running: squeue's (above)
    write_json(snakemake_record(tmp_path / ".snakemake" / "metadata", "results/b/model"), {"rule": "train"})
    assert recovery._mark_unrecorded(notes, tmp_path) == 1
    assert _marked(tmp_path, "results/a/model") and _marked(tmp_path, "results/a/log")
    assert not _marked(tmp_path, "results/b/model")
    observed("results/a/model and results/a/log marked incomplete; results/b/model (recorded) not")


def test_a_local_job_in_its_runs_own_allocation_is_not_noted(tmp_path, monkeypatch):
    """Snakemake inside ``sbatch`` or ``salloc``: its local jobs share its SLURM id and die with it, so a
    rerun in that allocation is not told to wait for (or ``scancel``) the allocation it runs in."""
    monkeypatch.setenv("SLURM_JOB_ID", "12345")
    monkeypatch.setenv(RUN_VARIABLE, "")  # restored after the run below sets it
    path = record_running_workflow(tmp_path, [], tmp_path)
    assert json.loads(path.read_text())["slurm_job"] == "12345"
    with recovery.slurm_job_noted(tmp_path, "rule train nie2023/tiny-bert/cl/seed42"):
        assert not path.with_suffix(".slurm").exists()
    forget_running_workflow(tmp_path, [], tmp_path)
