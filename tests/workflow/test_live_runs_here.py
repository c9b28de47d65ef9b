"""Runs of this host that overlap, without Snakemake: a live run's results folder, under any of its names,
refuses a second run, and the locks of runs that ended are never written back by the runs ending beside
them. Each run is a process driving the library's entry points in Snakemake's order (record, forget,
Snakemake's unlock of the whole ``.snakemake/locks``, exit)."""

from __future__ import annotations

import json
import multiprocessing
import os
import shlex
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from contrastlab.workflow import recovery
from contrastlab.workflow.recovery import record_running_workflow, recover_killed_run, runs_folder
from tests.workflow.helpers import lock, results_under_two_names, wait_for

#: One run: it reads a step per line ("record", "forget", "unlock") and answers "done"; it exits (its
#: atexit hooks run) when its input closes. Its working directory is the workflow's: the Snakefile passes
#: none, so the library's default, ".", is what a real run uses.
DRIVER = textwrap.dedent(
    """
    import shutil
    import sys
    from pathlib import Path
    from contrastlab.workflow.recovery import forget_running_workflow, record_running_workflow
    results, *own = sys.argv[1:]
    for step in sys.stdin:
        step = step.strip()
        if step == "record":
            record_running_workflow(results, own)
        elif step == "forget":
            forget_running_workflow(results, own)
        elif step == "unlock":  # Snakemake's: its own lock files, then the whole folder
            for path in own:
                Path(path).unlink(missing_ok=True)
            shutil.rmtree(Path(".snakemake", "locks"), ignore_errors=True)
        print("done", flush=True)
    """
)


class Run:
    """A run on ``results`` from ``workdir`` holding ``locks`` (lock files it wrote, as Snakemake does)."""

    def __init__(self, workdir: Path, results: Path, *locks: Path):
        self.process = subprocess.Popen(
            [sys.executable, "-c", DRIVER, str(results), *map(str, locks)],
            cwd=workdir,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        self.pid = self.process.pid

    def step(self, name: str) -> None:
        self.process.stdin.write(name + "\n")
        self.process.stdin.flush()
        assert self.process.stdout.readline() == "done\n", f"step {name} of run {self.pid} failed"

    def exit(self) -> None:
        self.process.stdin.close()
        assert self.process.wait(timeout=60) == 0

    def kill(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait()


def _lock_names(lock_dir: Path) -> list[str]:
    return sorted(p.name for p in lock_dir.glob("*.lock"))


@pytest.fixture
def runs():
    started: list[Run] = []

    def start(*args) -> Run:
        started.append(Run(*args))
        return started[-1]

    yield start
    for run in started:
        run.kill()


@pytest.mark.fault(
    "a live run on results/a; a second run on results/b, a symlink to a (C3)",
    "refused in one line naming the live run's pid and command; the same under the same name",
)
def test_a_live_run_refuses_a_second_run_on_its_folder_under_any_name(tmp_path, runs, observed):
    real, link = results_under_two_names(tmp_path)
    live = runs(tmp_path, real)
    live.step("record")
    (record,) = runs_folder(real).iterdir()
    command = shlex.join(json.loads(record.read_text())["command"])  # its sys.argv: -c and its arguments
    assert command == f"-c {real}"

    for spelling in (link, real, tmp_path / "results" / "." / "b"):
        assert recovery.live_run_refusal(str(spelling)) == (
            f"contrastlab: {spelling} is in use by another run on this host (pid {live.pid}, started as "
            f"`{command}` on {real}); wait for it to end or stop it (kill {live.pid}), then run this command "
            "again"
        )
    observed(recovery.live_run_refusal(str(link)))
    assert [p.name for p in runs_folder(real).iterdir()] == [p.name for p in runs_folder(link).iterdir()]
    assert recover_killed_run(str(link), tmp_path) == [] and len(list(runs_folder(real).iterdir())) == 1


def test_no_refusal_for_its_own_record_a_dead_run_or_a_run_elsewhere(tmp_path, runs):
    real, link = results_under_two_names(tmp_path)
    own = record_running_workflow(link, [], tmp_path)
    assert recovery.live_run_refusal(str(real)) is None  # this process's own record
    own.unlink()

    dead = runs(tmp_path, real)
    dead.step("record")
    (record,) = runs_folder(real).iterdir()
    dead.kill()  # killed: its record stays
    assert recovery.live_run_refusal(str(link)) is None
    assert recover_killed_run(str(link), tmp_path) == [
        f"contrastlab: a run on {link} (pid {dead.pid}) was killed; removed its 0 stale lock file(s), its "
        "incomplete jobs will be rerun"
    ]
    assert not record.exists()

    other = runs(tmp_path, tmp_path / "results" / "other")
    other.step("record")  # live, but on another folder
    assert recovery.live_run_refusal(str(link)) is None


@pytest.mark.parametrize("first", ["a", "b"])
@pytest.mark.fault(
    "two runs on two results folders of one checkout end at the same moment (C2)",
    "neither writes the other's locks back: .snakemake/locks ends empty",
)
def test_two_runs_ending_together_leave_no_lock_behind(tmp_path, runs, first, observed):
    locks = tmp_path / ".snakemake" / "locks"
    held = {
        "a": [lock(locks, "0.input.lock", "results/a/data"), lock(locks, "0.output.lock", "results/a/m")],
        "b": [lock(locks, "1.input.lock", "results/b/data"), lock(locks, "1.output.lock", "results/b/m")],
    }
    run = {name: runs(tmp_path, tmp_path / "results" / name, *held[name]) for name in held}
    second = "b" if first == "a" else "a"
    for name in (first, second):
        run[name].step("record")
    # Both end in the same instant: each forgets itself while the other's record is still there, then
    # Snakemake unlocks, and the processes exit with the other's record already gone.
    run[first].step("forget")
    run[second].step("forget")
    run[first].step("unlock")
    run[first].exit()
    run[second].step("unlock")
    run[second].exit()

    assert _lock_names(locks) == []
    assert recover_killed_run(str(tmp_path / "results" / "a"), tmp_path) == []  # nothing left to clear
    observed(f"{first} ended first; locks after both exited: none")


def test_a_run_still_going_gets_its_locks_back_when_another_ends(tmp_path, runs):
    locks = tmp_path / ".snakemake" / "locks"
    ending_locks = [lock(locks, "0.output.lock", "results/a/m")]
    going_locks = [
        lock(locks, "1.input.lock", "results/b/data"),
        lock(locks, "1.output.lock", "results/b/m"),
    ]
    ending = runs(tmp_path, tmp_path / "results" / "a", *ending_locks)
    going = runs(tmp_path, tmp_path / "results" / "b", *going_locks)
    ending.step("record")
    going.step("record")
    ending.step("forget")
    ending.step("unlock")
    ending.exit()

    assert {p.name: p.read_text() for p in locks.glob("*.lock")} == {
        "1.input.lock": "results/b/data\n",
        "1.output.lock": "results/b/m\n",
    }
    going.step("forget")
    going.step("unlock")
    going.exit()
    assert _lock_names(locks) == []


@pytest.mark.fault(
    "lock files in .snakemake/locks that no run record claims, as C2 left them before its fix (C2)",
    "removed by the next run's recovery, in one line; a live run's locks stay",
)
def test_recovery_removes_the_lock_files_no_live_run_claims(tmp_path, runs, observed):
    locks = tmp_path / ".snakemake" / "locks"
    stale = [lock(locks, "0.input.lock", "results/x/data"), lock(locks, "0.output.lock", "results/x/m")]
    live_lock = lock(locks, "1.output.lock", "results/b/m")
    live = runs(tmp_path, tmp_path / "results" / "b", live_lock)
    live.step("record")  # a live run on another results folder of this checkout

    notes = recover_killed_run(str(tmp_path / "results" / "a"), tmp_path)

    assert notes == [
        f"contrastlab: removed 2 lock file(s) in {locks} that no live run claims (0.input.lock, "
        "0.output.lock: left by runs that ended or were killed together)"
    ]
    assert _lock_names(locks) == ["1.output.lock"] and not any(p.exists() for p in stale)
    assert recover_killed_run(str(tmp_path / "results" / "a"), tmp_path) == []
    observed(notes[0])


def test_unclaimed_locks_stay_while_a_snakemake_without_a_record_runs_in_the_checkout(tmp_path):
    """A run between taking its locks and writing its record (onstart) claims them in no record yet."""
    locks = tmp_path / ".snakemake" / "locks"
    lock(locks, "0.output.lock", "results/x/m")
    starting = subprocess.Popen(["snakemake", "60"], executable=shutil.which("sleep"), cwd=tmp_path)
    try:
        # asked only once the scan sees the stand-in: on one CI run it did not yet (cause not found here)
        wait_for(lambda: starting.pid in recovery._snakemake_processes(tmp_path), timeout=10)
        assert recover_killed_run(str(tmp_path / "results" / "a"), tmp_path) == []
        assert _lock_names(locks) == ["0.output.lock"]
    finally:
        starting.kill()
        starting.wait()
    (note,) = recover_killed_run(str(tmp_path / "results" / "a"), tmp_path)
    assert note.startswith("contrastlab: removed 1 lock file(s)") and _lock_names(locks) == []


def _claim_at(barrier, results: str, answers, release) -> None:
    """One run's start: wait for the other, claim ``results`` (the Snakefile's first step on it), report
    the answer, and hold the claim until ``release``, as a live run does."""
    barrier.wait(timeout=30)
    answers.put((results, recovery.claim_results_folder(results)))
    release.wait(timeout=30)


@pytest.mark.fault(
    "two runs on one results folder under two names (a symlink, the real path) started together (R4)",
    "exactly one claims the folder and runs, 20 tries of 20; the other is refused in one line naming it",
)
def test_two_runs_started_together_under_two_names_one_runs(tmp_path, observed):
    real, link = results_under_two_names(tmp_path)
    context = multiprocessing.get_context("fork")  # two processes with the library imported: fast starts
    refusals = []
    for attempt in range(20):
        barrier, answers, release = context.Barrier(2), context.Queue(), context.Event()
        names = (str(link), str(real)) if attempt % 2 else (str(real), str(link))
        runs = [context.Process(target=_claim_at, args=(barrier, n, answers, release)) for n in names]
        for run in runs:
            run.start()
        got = dict(answers.get(timeout=30) for _ in runs)
        release.set()
        for run in runs:
            run.join(timeout=30)
        assert [r.exitcode for r in runs] == [0, 0]
        winners = [name for name, refusal in got.items() if refusal is None]
        assert len(winners) == 1, (attempt, got)
        (loser,) = set(names) - set(winners)
        refusals.append(got[loser])
        assert got[loser].startswith(f"contrastlab: {loser} is in use by another run "), got[loser]
        assert got[loser].endswith("then run this command again"), got[loser]
    observed(f"20 of 20 tries: one run claimed the folder; e.g. {refusals[0]}")


def test_the_claim_names_its_holder_and_is_freed_by_a_kill(tmp_path, runs):
    """The refused run names the holder's pid and command (its claim file); once the holder is killed,
    the kernel has released the claim: the next run takes it."""
    real, link = results_under_two_names(tmp_path)
    code = "import sys, time\nfrom contrastlab.workflow.recovery import claim_results_folder\n"
    code += "print(claim_results_folder(sys.argv[1]), flush=True)\ntime.sleep(60)\n"
    holder = subprocess.Popen([sys.executable, "-c", code, str(real)], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline() == "None\n"
        claim = recovery.claim_path(link)
        assert claim == real / "state" / "runs" / ".claim"
        assert json.loads(claim.read_text())["pid"] == holder.pid
        asked = [sys.executable, "-c", code.replace("time.sleep(60)", ""), str(link)]
        refused = subprocess.run(asked, capture_output=True, text=True, timeout=60).stdout.strip()
        assert refused == (
            f"contrastlab: {link} is in use by another run on this host (pid {holder.pid}, started as "
            f"`-c {real}` on {real}); wait for it to end or stop it (kill {holder.pid}), then run this "
            "command again"
        )
    finally:
        holder.kill()
        holder.wait()
    assert subprocess.run(asked, capture_output=True, text=True, timeout=60).stdout == "None\n"
    assert not claim.exists()  # a run that ends removes its claim file (a killed one leaves it: harmless)
    fresh = tmp_path / "results" / "new"  # a dry run on a folder not made yet leaves nothing behind
    assert subprocess.run([*asked[:-1], str(fresh)], capture_output=True, text=True).stdout == "None\n"
    assert not fresh.exists()


def test_a_folder_that_cannot_be_locked_or_made_is_not_claimed(tmp_path, monkeypatch):
    """A file system without locks (ENOLCK) or a folder that cannot be made: no claim, no error (the run
    records still refuse a later run)."""
    import errno
    import fcntl

    def no_locks(fd, operation):
        raise OSError(errno.ENOLCK, "No locks available")

    monkeypatch.setattr(fcntl, "flock", no_locks)
    assert recovery.claim_results_folder(str(tmp_path / "nfs")) is None
    assert str(os.path.realpath(tmp_path / "nfs")) not in recovery._CLAIMS
    monkeypatch.undo()
    blocker = tmp_path / "file"
    blocker.write_text("")
    assert recovery.claim_results_folder(str(blocker / "results")) is None  # under a file: nothing made
