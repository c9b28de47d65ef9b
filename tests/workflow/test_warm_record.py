"""The warm starter's job record by hand: a fork's usage beside its benchmark file, in the cost tables'
units, for a search point's cell; the start record a fork claims and the log line that says it."""

from __future__ import annotations

import json
import os
from types import SimpleNamespace

import pytest

from contrastlab.cost.measured import read_benchmark, read_job_costs, warm_usage_path
from contrastlab.workflow import job_start, warm

#: The rule train's benchmark pattern as the Snakefile writes it (RESULTS.benchmark("train", CELL)), with a
#: constraint as rules/common.smk sets them (stripped for the environment: the job's wildcards met it).
TRAIN = "{root}/benchmarks/train/{{experiment}}/{{backbone}}/{{method,[^/]+}}/seed{{seed}}.tsv"
#: The start record of a process no fork claimed the record of (but its process's start).
NOT_HANDED_OVER = {"warm": False, "why_cold": job_start.NOT_HANDED_OVER, "handed_over": None, "waited_s": 0.0}


def test_a_warm_jobs_usage_by_hand_reaches_the_cost_table(tmp_path, monkeypatch):
    """Fork 300 MiB, waited-for children 400 MiB (ru_maxrss, kB): 400.0 MB; CPU 1.25 + 0.5 + 2.0 + 0.25 =
    4.0 s; read by the cost table for a search point's cell in place of the client's 26 MB. The patterns
    leave out the constraints (the full config's pass an environment string's 128 kB); a rule without a
    benchmark file gets no record."""
    rusage = {
        warm.resource.RUSAGE_SELF: SimpleNamespace(ru_maxrss=307_200, ru_utime=1.25, ru_stime=0.5),
        warm.resource.RUSAGE_CHILDREN: SimpleNamespace(ru_maxrss=409_600, ru_utime=2.0, ru_stime=0.25),
    }
    monkeypatch.setattr(warm.resource, "getrusage", rusage.__getitem__)
    rules = [SimpleNamespace(name="train", benchmark=TRAIN.format(root=tmp_path))]
    rules.append(SimpleNamespace(name="tables", benchmark=None))
    monkeypatch.setenv(warm.BENCHMARKS_VARIABLE, warm.benchmark_patterns(rules))
    assert "[^/]+" not in os.environ[warm.BENCHMARKS_VARIABLE]
    warm.record_usage(SimpleNamespace(rule="tables", wildcards={}))
    assert not (tmp_path / "benchmarks").exists()
    cell = {"experiment": "nie2023", "backbone": "tiny-bert", "method": "mpt~s1-lr3e-05-m0.23", "seed": "42"}
    warm.record_usage(SimpleNamespace(rule="train", wildcards=cell))
    benchmark = tmp_path / "benchmarks/train/nie2023/tiny-bert/mpt~s1-lr3e-05-m0.23/seed42.tsv"
    assert list(benchmark.parent.iterdir()) == [benchmark.with_suffix(".warm.json")]
    assert json.loads(warm_usage_path(benchmark).read_text()) == {"max_rss": 400.0, "cpu_time": 4.0}
    # Snakemake writes its benchmark file as the job ends, just after the fork's record
    benchmark.write_text("s\th:m:s\tmax_rss\tcpu_time\n12.5\t0:00:12\t26.0\t0.4\n")
    assert read_benchmark(benchmark) == (12.5, 400.0)
    (job,) = read_job_costs(tmp_path)
    assert (job.rule, job.cell, job.seconds, job.max_rss_mb) == (
        "train",
        "nie2023/tiny-bert/mpt~s1-lr3e-05-m0.23/seed42",
        12.5,
        400.0,
    )


def test_the_start_record_a_fork_claims_and_its_log_line_by_hand(monkeypatch):
    """A fork claims hand_over's record (warm, the client's start, the wait in ms); another process reads "not
    a Snakemake script process"; the log line: 2.5 s from the start, 0.75 of it waiting."""
    monkeypatch.setattr(job_start, "process_started", lambda: 1000.0)
    monkeypatch.setattr(job_start.time, "time", lambda: 1002.0)
    sent = job_start.start_state(warm=True, why_cold=None, waited_s=0.75049, pid=None)
    assert json.loads(sent) == {
        "warm": True,
        "why_cold": None,
        "process_started": 1000.0,
        "handed_over": 1002.0,
        "waited_s": 0.75,
        "pid": None,
    }
    env = {job_start.STATE_VARIABLE: sent}
    job_start.claim_start_record(env)
    assert json.loads(env[job_start.STATE_VARIABLE])["pid"] == os.getpid()
    monkeypatch.setenv(job_start.STATE_VARIABLE, env[job_start.STATE_VARIABLE])
    record = job_start.start_record()
    assert record == {key: value for key, value in json.loads(sent).items() if key != "pid"}
    monkeypatch.setattr(job_start.time, "time", lambda: 1002.5)
    assert job_start.start_line(record) == (
        "job start: warm (fork of a starter), 2.5 s after the process began, 0.8 s of it waiting for the "
        "starter"
    )
    assert job_start.start_line({**record, "waited_s": 0.049}) == (
        "job start: warm (fork of a starter), 2.5 s after the process began"
    )
    # the same record in a process it does not name (one a job started): not handed over
    monkeypatch.setenv(job_start.STATE_VARIABLE, json.dumps({**json.loads(sent), "pid": os.getpid() + 1}))
    assert job_start.start_record() == {**NOT_HANDED_OVER, "process_started": 1000.0}


@pytest.mark.parametrize("raw", ["{not json", "[1, 2]", "", None, '{"warm": true, "pid": null}'])
def test_an_unreadable_start_record_reads_as_not_handed_over(monkeypatch, raw):
    """No record, one that cannot be read, or one no fork claimed yet (the client sends it without a
    process: it does not know its fork's): cold, "not a Snakemake script process"."""
    monkeypatch.setattr(job_start, "process_started", lambda: 7.0)
    if raw is None:
        monkeypatch.delenv(job_start.STATE_VARIABLE, raising=False)
    else:
        monkeypatch.setenv(job_start.STATE_VARIABLE, raw)
    assert job_start.start_record() == {**NOT_HANDED_OVER, "process_started": 7.0}
