"""A live run is never taken for a dead one: beside run A training on a results folder, a run B on this
host and A's command from another PID namespace (a second login node) are refused, by A's record and by
its claim on the folder; A keeps its locks, its record and its training."""

from __future__ import annotations

import hashlib
import json
import os
import signal
import subprocess
from pathlib import Path

import pytest

from contrastlab.workflow.recovery import runs_folder
from tests.workflow.helpers import wait_for

from .conftest import OFFLINE, SNAKEMAKE, macl_pair, run_snakemake, snakemake_process, start_snakemake, write

pytestmark = pytest.mark.slow
SCHEDULE_FIRST = 12  # a long module: tests/conftest.py starts the highest numbers first

CELL = Path("macl", "tiny-bert")


def _record_of(results: Path, pid: int) -> Path:
    def found():
        return [p for p in runs_folder(results).glob("*.json") if json.loads(p.read_text())["pid"] == pid]

    return wait_for(found, 240, f"the record of run {pid}")[0]


def _held_locks(repo_root: Path, record: Path) -> dict[Path, bytes]:
    """The lock files in the repository's .snakemake/locks that the run of ``record`` wrote."""
    digests = set(json.loads(record.read_text())["locks"])
    locks = {lock: lock.read_bytes() for lock in (repo_root / ".snakemake" / "locks").glob("*.lock")}
    return {
        lock: content for lock, content in locks.items() if hashlib.sha256(content).hexdigest() in digests
    }


@pytest.fixture(scope="module")
def live_run(repo_root, tmp_path_factory, e2e_resources):
    """Run A, training the simcse cell (for tens of minutes if left alone), with the data steps already
    done so that a run on the other cell's target shares no output with it; killed at teardown."""
    workdir = tmp_path_factory.mktemp("live")
    config = macl_pair(repo_root, workdir, e2e_resources)
    config["training"].update(max_steps=100_000, eval_every=50_000, state_every=5, log_every=10)
    results = workdir / "results"
    configfile = write(config, workdir / "c.yaml")  # last: --configfile takes every word after it
    profile = ["--workflow-profile", "profiles/default", "--cores", "1", "--configfile", configfile]
    targets = {m: results / "checkpoints" / CELL / m / "seed42" / "model" for m in ("simcse", "macl")}
    run_snakemake(repo_root, *map(str, targets.values()), "--omit-from", "train", *profile)
    a = start_snakemake(repo_root, [str(targets["simcse"]), *profile], workdir / "a.out")
    try:
        record = _record_of(results, a.pid)
        locks = _held_locks(repo_root, record)
        assert a.poll() is None and locks, (workdir / "a.out").read_text()[-3000:]
        yield a, results, profile, targets, record, locks
    finally:
        os.killpg(a.pid, signal.SIGKILL)
        a.wait(timeout=30)


def _a_untouched(repo_root: Path, live_run) -> str:
    a, results, _, _, record, locks = live_run
    assert a.poll() is None, "run A should still be running"
    assert record.is_file(), "run A's record was removed"
    assert {lock: lock.read_bytes() for lock in locks if lock.exists()} == locks, "run A's locks were touched"
    snapshot = results / "state" / "train" / CELL / "simcse" / "seed42" / "state.pt"
    wait_for(snapshot.is_file, 120, "run A's first snapshot")
    written = snapshot.stat().st_mtime_ns
    wait_for(lambda: snapshot.stat().st_mtime_ns != written, 60, "run A's next snapshot (it trains on)")
    return f"A (pid {a.pid}) alive, {len(locks)} lock file(s) and record intact, still snapshotting"


@pytest.mark.fault(
    "live run A; run B (disjoint target, same results) started beside it (reliability P5)",
    "B refused in one line naming A before it plans or locks; A keeps its locks, record and training",
)
def test_a_second_run_beside_a_live_run_is_refused_before_it_takes_anything(repo_root, live_run, observed):
    """A run of this host is refused beside a live one on its folder before it takes anything."""
    a, results, profile, targets, _, _ = live_run
    b = snakemake_process(repo_root, str(targets["macl"]), *profile)
    output = b.stdout + b.stderr
    refused = f"contrastlab: {results} is in use by another run on this host (pid {a.pid}, started as "
    assert b.returncode != 0 and refused in output, output[-3000:]
    assert "was killed" not in output and "Job stats" not in output, output[-3000:]
    line = next(x for x in output.splitlines() if x.startswith(refused))
    observed(line[:120] + "...; " + _a_untouched(repo_root, live_run))


@pytest.mark.fault(
    "live run A; A's command again from another PID namespace (reliability P4: another login node)",
    "refused in one line by A's claim on the folder, naming A's PID namespace as another; A untouched",
)
def test_a_run_from_another_pid_namespace_never_takes_a_live_runs_locks(repo_root, live_run, observed):
    if subprocess.run(["unshare", "--pid", "--fork", "--mount-proc", "true"], capture_output=True).returncode:
        pytest.skip("unshare --pid --mount-proc is not permitted here (needs root or user namespaces)")
    a, results, profile, targets, record, _ = live_run
    env = dict(os.environ, **OFFLINE)
    command = ["unshare", "--pid", "--fork", "--mount-proc", *SNAKEMAKE, "-s", str(repo_root / "Snakefile")]
    command += [str(targets["simcse"]), *profile]
    other = subprocess.run(command, cwd=repo_root, env=env, capture_output=True, text=True, timeout=600)
    output = other.stdout + other.stderr
    refused = (
        f"contrastlab: {results} is in use by another run on {os.uname().nodename} in another PID namespace"
    )
    line = next((x for x in output.splitlines() if x.startswith(refused)), None)
    assert other.returncode != 0 and line is not None and f"(pid {a.pid}, " in line, output[-3000:]
    assert "was killed" not in output and "Job stats" not in output and record.is_file(), output[-3000:]
    observed(line[:160] + "...; " + _a_untouched(repo_root, live_run))
