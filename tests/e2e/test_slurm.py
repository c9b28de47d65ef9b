"""The SLURM profiles on a real single-node SLURM (tests/e2e/slurm_cluster.py), and what makes them
safe there: a job that asked for a GPU and sees none stops in one line instead of running on the CPU;
the profile's retry resumes a cancelled training job and skips failures that a retry reproduces.

The cluster tests run the profiles unedited plus the overrides docs/cluster.md documents for a cluster
without accounting (partition, ``--slurm-status-command squeue``), and two test-only polling knobs:
the plugin waits 40 s before its first status check and adds 10 s per check, for jobs of hours; these
jobs take seconds. They are skipped with the reason when no cluster can be started here.
"""

from __future__ import annotations

import collections
import json
import os
import re
import subprocess
import time
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch

from contrastlab.config import load
from contrastlab.paths import Results, read_json, snakemake_record
from contrastlab.report import build_report
from contrastlab.training.sentence import NonFiniteLossError
from contrastlab.workflow.finished import marked_incomplete
from contrastlab.workflow.gpus import GpuUnavailableError, requested_gpus, require_requested_gpu
from contrastlab.workflow.job import logged_to
from contrastlab.workflow.recovery import RUN_VARIABLE, workflow_run
from tests import forked, mps_standin

from .conftest import SNAKEMAKE, job_counts, reduced_demo, run_snakemake, write

SCHEDULE_FIRST = 16  # a long module: tests/conftest.py starts the highest numbers first

CELL = ("nie2023", "tiny-bert", "cl", "42")
CELL_PATH = "nie2023/tiny-bert/cl/seed42"
# Test-only: status checks every few seconds instead of after 40 s, +10 s per check (see the docstring).
FAST_POLLING = ["--slurm-init-seconds-before-status-checks", "2", "--seconds-between-status-checks", "2"]
# (a group job's id is a UUID, a rule job's a number)
SUBMITTED = re.compile(r"Job (\S+) has been submitted with SLURM jobid (\d+) \(log: (\S+?)\)\.")
# The SentEval probe jobs of a run go to SLURM as group jobs (profiles/slurm: group-components), 4 at a
# time in each; this node has this machine's 2 CPUs, so docs/cluster.md's override for a small node
# runs 2 at a time.
PROBE_GROUP = "group_senteval_probes"
SMALL_NODE = ["--resources", "probe_slots=2", "pack_slots=1"]
#: The SLURM job of two training jobs that share a GPU (resources.gpu_share 2: the group gpu_pack2).
PACK_GROUP = "group_gpu_pack2"


# --- the GPU check and the retry marker (no cluster needed) -------------------------------------------


def _job(tmp_path: Path, **resources) -> SimpleNamespace:
    """What a script sees as ``snakemake`` for the training job of :data:`CELL`."""
    return SimpleNamespace(
        rule="train",
        wildcards=dict(zip(("experiment", "backbone", "method", "seed"), CELL, strict=True)),
        resources=resources,
        config={"results_dir": str(tmp_path / "results")},
    )


def test_requested_gpus_reads_the_gpu_resource_and_a_gpu_gres():
    def gpus(**resources):
        return requested_gpus(SimpleNamespace(resources=resources))

    assert gpus() == gpus(gpu=0) == gpus(gres="") == gpus(gpu="<TBD>") == 0
    assert gpus(gpu=1) == gpus(gpu=0, gres="gpu:1") == gpus(gres="gpu") == 1
    assert gpus(gres="gpu:a100:2") == gpus(gres="tmpdisk:10G,gpu:2") == 2
    assert gpus(gres="tmpdisk:100") == 0


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the error on a machine without a usable GPU")
@pytest.mark.parametrize("resources", [{"gpu": 1}, {"gpu": 0, "gres": "gpu:1"}], ids=["gpus", "gres"])
def test_a_job_that_asked_for_a_gpu_and_sees_none_stops_in_one_line(tmp_path, capfd, resources):
    job = _job(tmp_path, **resources)
    ran = []
    with pytest.raises(SystemExit) as stopped:
        with logged_to(tmp_path / "train.log", "rule train nie2023/tiny-bert/cl/seed42"):
            require_requested_gpu(job)
            ran.append("training on the CPU")
    assert stopped.value.code == 1 and ran == []
    lines = capfd.readouterr().err.splitlines()
    assert len(lines) == 1, lines
    assert lines[0].startswith(
        "contrastlab: rule train nie2023/tiny-bert/cl/seed42: GpuUnavailableError: this job asked for 1 "
        "GPU(s) but torch sees none (torch.cuda.is_available() is False on "
    ), lines[0]
    assert "resources.gpu: 0" in lines[0] and lines[0].endswith(f"(log: {tmp_path / 'train.log'})")
    require_requested_gpu(_job(tmp_path, gpu=0))  # a CPU job runs wherever it is


def _attempt(tmp_path: Path, run: str | None, error: BaseException | None) -> bool:
    """One attempt of a job whose body raises ``error``: whether the body ran."""
    ran = []
    label = f"rule train {CELL_PATH}"
    try:
        with logged_to(tmp_path / "train.log", label, failure_record=tmp_path / "failed.json", run=run):
            ran.append(True)
            if error is not None:
                raise error
    except SystemExit:
        pass
    return bool(ran)


def test_a_retry_of_a_nan_loss_stops_at_once_with_the_same_line(tmp_path, capfd):
    nan = NonFiniteLossError("training loss is not finite at step 2")
    assert _attempt(tmp_path, "100:7", nan)  # attempt 1 trains and fails
    first = capfd.readouterr().err.strip()
    record = json.loads((tmp_path / "failed.json").read_text())
    assert record["retry_can_help"] is False and record["run"] == "100:7" and record["error"] == first
    assert not _attempt(tmp_path, "100:7", nan)  # Snakemake's retry in the same run: does not train
    assert capfd.readouterr().err.strip() == first
    assert "not retried (a retry fails the same way)" in (tmp_path / "train.log").read_text()
    assert (tmp_path / "failed.json").exists()  # the tables still say failed
    assert _attempt(tmp_path, "200:9", None)  # a new invocation (the user changed something) trains
    assert not (tmp_path / "failed.json").exists()


@pytest.mark.parametrize(
    "error",
    [GpuUnavailableError("no GPU on this node"), OSError("stale file handle"), None],
    ids=["broken-gpu", "io-error", "killed"],
)
def test_a_retry_runs_again_after_a_failure_another_attempt_may_not_have(tmp_path, error):
    """A broken GPU or an I/O error may not recur on another node; a killed job (scancel, preemption)
    writes no record at all."""
    if error is not None:
        assert _attempt(tmp_path, "100:7", error)
        assert json.loads((tmp_path / "failed.json").read_text())["retry_can_help"] is True
    assert _attempt(tmp_path, "100:7", None)


def test_workflow_run_names_the_submitting_snakemake_invocation(monkeypatch):
    """The invocation reaches a job through the environment: the main Snakemake sets it when it starts
    executing (record_running_workflow), and the SLURM plugin submits with --export=ALL."""
    monkeypatch.delenv(RUN_VARIABLE, raising=False)
    assert workflow_run() is None
    monkeypatch.setenv(RUN_VARIABLE, "login1:123:456")
    assert workflow_run() == "login1:123:456"


def slurm_demo(repo_root: Path, workdir: Path, resources: Path) -> dict:
    """The reduced demo on one loss (:data:`CELL`, each SLURM job costing about 15 CPU-seconds before its
    work) beside the pretrained row, 60 steps with a snapshot every 5 so a test can cancel a job
    mid-training; memory requests this machine's node can grant."""
    config = reduced_demo(repo_root, workdir)
    config["resources_dir"] = str(resources)
    config["oar_synthetic"] = None
    methods = config["experiments"]["nie2023"]["methods"]
    config["experiments"]["nie2023"]["methods"] = {CELL[2]: methods[CELL[2]]}
    config["training"].update(max_steps=60, eval_every=30, state_every=5, log_every=5)
    config["resources"].update(train_mem_mb=1500, eval_mem_mb=1500, train_runtime_min=20, eval_runtime_min=20)
    return config


@pytest.fixture(scope="module")
def local_reference(repo_root, tmp_path_factory, e2e_resources):
    """What the SLURM run must reproduce: :func:`slurm_demo`'s cells trained and evaluated through
    ``profiles/default`` and its tables rendered (no figures: no table's number comes from them)."""
    workdir = tmp_path_factory.mktemp("local")
    configfile = write(slurm_demo(repo_root, workdir, e2e_resources), workdir / "c.yaml")
    results = workdir / "results"
    cell = f"{results}/metrics/{CELL_PATH}/senteval.json"
    pretrained = f"{results}/metrics/pretrained/tiny-bert/senteval.json"
    profile = ["--workflow-profile", "profiles/default", "--cores", "2", "--configfile", configfile]
    run_snakemake(repo_root, *profile, "--", cell, pretrained)
    build_report(Results(results), load(configfile))
    return results


def slurm_command(repo_root: Path, cluster, profile: str, configfile: str, *args: str) -> list[str]:
    """Snakemake through ``profiles/<profile>`` with only docs/cluster.md's overrides for this cluster."""
    workflow = ["-s", str(repo_root / "Snakefile"), "--workflow-profile", f"{repo_root}/profiles/{profile}"]
    partition = ["--default-resources", f"slurm_partition={cluster.partition}"]
    overrides = [*partition, "--slurm-status-command", "squeue", *SMALL_NODE, *FAST_POLLING]
    # targets after a "--" in args: --configfile takes every word up to the next option
    return [*SNAKEMAKE, *workflow, *overrides, "--configfile", configfile, *args]


def slurm_env(cluster) -> dict[str, str]:
    return dict(cluster.env, HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1")


def run_through_slurm(repo_root, cluster, profile, configfile, *args, check=True, env=None) -> str:
    """Snakemake through ``profiles/<profile>`` (:func:`slurm_command`); ``env``: variables set for it
    (over :func:`slurm_env`), which the plugin passes on to the jobs (sbatch --export=ALL)."""
    command = slurm_command(repo_root, cluster, profile, configfile, *args)
    env = slurm_env(cluster) | dict(env or {})
    done = forked.snakemake(command[len(SNAKEMAKE) :], cwd=repo_root, env=env, timeout=600)
    output = done.stdout + done.stderr
    if check:
        assert done.returncode == 0, output[-5000:] + "\n" + cluster.log_tail()
    return output


@pytest.mark.fault(
    "results_dir=<tmp>/s$(touch <tmp>/PWN) through profiles/slurm",
    "refused in one line naming results_dir before any sbatch; PWN never created",
)
def test_a_config_string_a_shell_would_run_is_refused_before_any_sbatch(
    repo_root, cluster, e2e_resources, tmp_path, observed
):
    """The plugin submits ``sbatch --wrap="<job command>"`` through a shell, the ``--config`` overrides
    in it: the run stops while the Snakefile is read, before the first job (Nie's analytic figure)."""
    configfile = write(slurm_demo(repo_root, tmp_path, e2e_resources), tmp_path / "c.yaml")
    marker = tmp_path / "PWN"
    results = f"{tmp_path}/s$(touch {marker})"
    jobs_before = [job["JobId"] for job in cluster.jobs()]
    target = ("--config", f"results_dir={results}", "--", "figure_analytic_nie2023")
    output = run_through_slurm(repo_root, cluster, "slurm", configfile, *target, check=False)
    said = [line for line in output.splitlines() if line.startswith("contrastlab:")]
    observed(f"{said}; {marker.name} exists: {marker.exists()}")
    assert not marker.exists(), output[-3000:]
    assert said == [
        f"contrastlab: config key results_dir: {results!r} holds '$', which the SLURM submission's shell "
        'would interpret (sbatch --wrap="..." quotes the job command in double quotes); remove $, `, \\, " '
        "and control characters from it"
    ], output[-3000:]
    assert not SUBMITTED.search(output) and [job["JobId"] for job in cluster.jobs()] == jobs_before


def submissions(output: str) -> dict[str, str]:
    """SLURM job id -> rule of every job the plugin submitted (its log is .../rule_<name>/...), or
    :data:`PROBE_GROUP` for a group job of probe jobs (.../group_senteval_probes_<its rules>/...)."""
    found = {}
    for _, slurm_id, log in SUBMITTED.findall(output):
        rule = re.search(r"/rule_(\w+?)/", log + "/")
        group = next((g for g in (PROBE_GROUP, PACK_GROUP) if f"/{g}_" in log), None)
        assert rule or group, log
        found[slurm_id] = rule.group(1) if rule else group
    return found


def same_weights(ours: Path, theirs: Path) -> bool:
    """Whether the checkpoints ``ours`` and ``theirs`` hold the same tensors."""
    from safetensors.torch import load_file

    a, b = (load_file(p / "model" / "model.safetensors") for p in (ours, theirs))
    return a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)


def same_tables(ours: Path, theirs: Path) -> list[str]:
    """The CSV tables under ``theirs``/tables (at least one), each asserted equal byte for byte to ours."""
    tables = sorted(p.name for p in (theirs / "tables").glob("*.csv"))
    assert tables, "the reference run wrote no table"
    for name in tables:
        assert (ours / "tables" / name).read_bytes() == (theirs / "tables" / name).read_bytes(), name
    return tables


def start_through_slurm(repo_root: Path, cluster, configfile: str, out_path: Path, *args: str):
    """:func:`slurm_command` through ``profiles/slurm`` started, its output written to ``out_path``."""
    with open(out_path, "w") as out:
        return subprocess.Popen(
            slurm_command(repo_root, cluster, "slurm", configfile, *args),
            cwd=repo_root,
            env=slurm_env(cluster),
            stdout=out,
            stderr=subprocess.STDOUT,
        )


def wait_while_running(workflow: subprocess.Popen, out_path: Path, done, poll: float = 0.1) -> None:
    """Waits, 300 s at most, until ``done()``, asserting that ``workflow`` runs meanwhile."""
    deadline = time.monotonic() + 300
    while not done():
        assert workflow.poll() is None and time.monotonic() < deadline, out_path.read_text()[-4000:]
        time.sleep(poll)


def _cancel_once_it_trains(cluster, workflow, snapshot: Path, out_path: Path) -> str:
    """Waits for the first state snapshot of :data:`CELL`, then cancels its running training job with
    ``scancel``; returns that job's SLURM id."""
    wait_while_running(workflow, out_path, snapshot.exists)
    wildcards = "_".join(CELL)  # the plugin's comment: rule_train_wildcards_<experiment>_..._<seed>
    running = [
        j
        for j in cluster.jobs()
        if j["Comment"].startswith("rule_train") and wildcards in j["Comment"] and j["JobState"] == "RUNNING"
    ]
    assert len(running) == 1, cluster.jobs()
    cancelled = cluster.run("scancel", running[0]["JobId"])
    assert cancelled.returncode == 0, cancelled.stderr
    return running[0]["JobId"]


@pytest.mark.slow
def test_the_demo_through_slurm_equals_a_local_run_with_a_cancelled_training_job_resumed(
    repo_root, cluster, local_reference, e2e_resources, tmp_path
):
    """The demo without figures through profiles/slurm: every compute job submitted (the probes as one
    group job) asking what its rule says; a training job cancelled after its first snapshot is resumed by
    the profile's retry to the local run's curve, weights and scores; the tables equal byte for byte."""
    config = slurm_demo(repo_root, tmp_path, e2e_resources)
    config["figures"] = False
    configfile = write(config, tmp_path / "c.yaml")
    planned = job_counts(run_through_slurm(repo_root, cluster, "slurm", configfile, "-n"))
    results = tmp_path / "results"
    snapshot = results / "state" / "train" / CELL_PATH / "state.pt"
    out_path = tmp_path / "snakemake.out"
    started = time.monotonic()
    workflow = start_through_slurm(repo_root, cluster, configfile, out_path)
    try:
        killed = _cancel_once_it_trains(cluster, workflow, snapshot, out_path)
        workflow.wait(timeout=540)
    finally:
        if workflow.poll() is None:
            workflow.terminate()
            workflow.wait(timeout=60)
    seconds = time.monotonic() - started
    output = out_path.read_text()
    assert workflow.returncode == 0, output[-5000:] + "\n" + cluster.log_tail()

    # Jobs run on the submit host ("localrule X:") and sent to the cluster ("rule X:"), each once (a retry
    # keeps its job id), without the failed job's logs Snakemake prints.
    own = re.sub(r"^Logfile \S+:\n={80}\n.*?^={80}$", "", output, flags=re.M | re.S)
    jobs_run = set(re.findall(r"^\s*(local)?rule (\w+):\n(?:\s+\w+: .*\n)*?\s+jobid: (\d+)$", own, re.M))
    local = collections.Counter(rule for where, rule, _ in jobs_run if where)
    remote = collections.Counter(rule for where, rule, _ in jobs_run if not where)
    assert local + remote == {k: v for k, v in planned.items() if k != "total"}, (local, remote, planned)
    assert {"corpus", "senteval_data", "tables"} <= set(local), local  # backbones: already fetched
    expected = {"train": 1, "encode": 1, "evaluate": 1, "encode_pretrained": 1, "evaluate_pretrained": 1}
    assert expected.items() <= remote.items(), remote
    assert not [rule for rule in local + remote if rule.startswith("figure")], (local, remote)
    submitted = submissions(output)
    # the two SentEval probe jobs went out as one SLURM job (their group), every other job alone, and
    # the cancelled training job twice
    sent = (
        remote
        - collections.Counter(evaluate=1, evaluate_pretrained=1)
        + collections.Counter([PROBE_GROUP, "train"])
    )
    assert collections.Counter(submitted.values()) == sent, (submitted, remote)
    assert submitted.get(killed) == "train", (killed, submitted)
    assert f"SLURM-job '{killed}' failed, SLURM status is: 'CANCELLED'" in output, output[-5000:]
    jobs = {job["JobId"]: job for job in cluster.jobs() if job["JobId"] in submitted}
    assert set(jobs) == set(submitted), (sorted(jobs), sorted(submitted))
    for slurm_id, job in jobs.items():
        rule = submitted[slurm_id]
        state = "CANCELLED" if slurm_id == killed else "COMPLETED"
        assert job["JobState"] == state and job["Partition"] == cluster.partition, job
        # a job: its threads (config resources.threads), not a profile default; the probes' group: 2 probe
        # jobs at a time (probe_slots=2), 2 x 1 CPU and 2 x 1500 MB, and one round of 20 min
        probes = rule == PROBE_GROUP
        assert job["NumCPUs"] == ("2" if probes else "1"), job
        if probes or rule in expected:
            assert job["MinMemoryNode"] == ("3000M" if probes else "1500M"), job
            assert job["TimeLimit"] == "00:20:00", job
            assert "gpu" not in job.get("TresPerJob", "") + job.get("TresPerNode", ""), job  # gpu: 0

    # The retry resumed from a snapshot, to the local run's curve, weights and scores.
    checkpoints = results / "checkpoints" / CELL_PATH
    records = [json.loads(line) for line in (checkpoints / "train_log.jsonl").open()]
    resumed = [r["step"] for r in records if r["event"] == "resume"]
    assert len(resumed) == 1 and 5 <= resumed[0] < 60 and records[-1]["steps"] == 60, resumed

    def curve(path: Path) -> list[dict]:
        keep = ("step", "loss", "lr", "grad_norm", "stats", "dev_spearman", "dev_align", "dev_uniformity")
        rows = [json.loads(line) for line in path.open()]
        return [{k: r[k] for k in keep if k in r} for r in rows if r["event"] in ("train", "eval")]

    reference = local_reference / "checkpoints" / CELL_PATH
    assert curve(checkpoints / "train_log.jsonl") == curve(reference / "train_log.jsonl")
    assert same_weights(checkpoints, reference)
    metrics = json.loads((results / "metrics" / CELL_PATH / "senteval.json").read_text())
    expected_metrics = json.loads((local_reference / "metrics" / CELL_PATH / "senteval.json").read_text())
    assert (
        metrics["scores"] == expected_metrics["scores"] and metrics["sts_avg"] == expected_metrics["sts_avg"]
    )

    tables = same_tables(results, local_reference)
    print(
        f"SLURM run: {len(submitted)} sbatch jobs in {seconds:.0f} s; {len(tables)} tables equal; "
        f"SLURM job {killed} cancelled, resumed at step {resumed[0]}"
    )


@pytest.mark.slow
@pytest.mark.fault(
    "Snakemake SIGKILLed while its SLURM training job runs; the same command again, then after scancel",
    "refused in one line naming the SLURM job and the fix, no second sbatch; after scancel it recovers",
)
def test_a_rerun_after_the_workflow_was_killed_waits_for_its_slurm_job(
    repo_root, cluster, e2e_resources, tmp_path, observed
):
    config = slurm_demo(repo_root, tmp_path, e2e_resources)
    config["training"].update(max_steps=5000)  # still training when the rerun asks
    configfile = write(config, tmp_path / "c.yaml")
    results, out_path = tmp_path / "results", tmp_path / "snakemake.out"
    target = ("--", f"{results}/checkpoints/{CELL_PATH}/model")
    workflow = start_through_slurm(repo_root, cluster, configfile, out_path, *target)
    job = None
    try:
        wait_while_running(workflow, out_path, (results / "state" / "train" / CELL_PATH / "state.pt").exists)
        workflow.kill()  # SIGKILL: its SLURM job trains on
        workflow.wait()
        (job,) = submissions(out_path.read_text())
        output = run_through_slurm(repo_root, cluster, "slurm", configfile, *target, check=False)
        said = [line for line in output.splitlines() if line.startswith("contrastlab:")]
        observed(str(said))
        assert said == [
            f"contrastlab: 1 SLURM job(s) of a killed run on {results} still queued or running ({job}: rule "
            f"train {CELL_PATH}); wait for it to end (squeue -j {job}) or cancel it (scancel {job}), then "
            "run this command again"
        ], output[-3000:]
        assert not SUBMITTED.search(output)
    finally:
        if workflow.poll() is None:
            workflow.kill()
        if job:
            cluster.run("scancel", job)
    while cluster.run("squeue", "-h", "-j", job).stdout.strip():
        time.sleep(0.5)
    output = run_through_slurm(repo_root, cluster, "slurm", configfile, "-n", *target)
    recovered = f"contrastlab: a run on {results} (pid {workflow.pid}) was killed; removed"
    assert recovered in output, output[-3000:]


@pytest.mark.fault(
    "under SLURM a training job ended and cleared its incomplete mark; its Snakemake SIGKILLed before it "
    "recorded the job; the same command again",
    "the rerun names the unrecorded job, reruns it without a training step (a re-export) and records it",
)
def test_a_job_that_ended_before_its_killed_run_recorded_it_is_recorded_by_the_rerun(
    repo_root, cluster, e2e_resources, tmp_path, observed
):
    config = slurm_demo(repo_root, tmp_path, e2e_resources)
    config["training"].update(max_steps=10, eval_every=10)  # how long it trains does not matter here
    configfile = write(config, tmp_path / "c.yaml")
    results, out_path = tmp_path / "results", tmp_path / "snakemake.out"
    model, metadata = f"{results}/checkpoints/{CELL_PATH}/model", repo_root / ".snakemake" / "metadata"
    evaluated = f"{results}/metrics/{CELL_PATH}/senteval.json"  # the run goes on after the training job
    workflow = start_through_slurm(repo_root, cluster, configfile, out_path, "--", evaluated)
    notes = results / "state" / "runs"

    def ended_and_unmarked() -> bool:
        """The job has ended (its note lists its outputs) and cleared its incomplete mark itself."""
        ended = any("ended" in read_json(p) for p in notes.glob("*.slurm/*.json"))
        return ended and not marked_incomplete(model, repo_root)

    try:
        wait_while_running(workflow, out_path, ended_and_unmarked, poll=0.02)
        workflow.kill()  # SIGKILL inside the seconds before its next status check records the job
        workflow.wait()
    finally:
        if workflow.poll() is None:
            workflow.kill()
    # a kill that came just after the record (the window is one status check wide) leaves it in that state,
    # once the job the run submitted next (the encoding) is gone
    snakemake_record(metadata, model).unlink(missing_ok=True)
    cluster.run("scancel", *(job["JobId"] for job in cluster.jobs()))
    while cluster.run("squeue", "-h").stdout.strip():
        time.sleep(0.5)
    output = run_through_slurm(repo_root, cluster, "slurm", configfile, "--", model)
    said = [line for line in output.splitlines() if line.startswith("contrastlab: a run on")]
    observed(str(said))
    assert len(said) == 1 and said[0].endswith("will be rerun (and 1 SLURM job(s) it did not record)"), output
    log = Path(model).parent / "train_log.jsonl"
    events = [json.loads(line)["event"] for line in log.read_text().splitlines()]
    assert events.count("start") == 1 and "resume" not in events  # re-exported, no step trained again
    assert snakemake_record(metadata, model).is_file()


# --- two training cells that share a GPU: one allocation, an MPS daemon ------------------------------------


def pack_demo(repo_root: Path, workdir: Path, resources: Path, gpu: int) -> dict:
    """:func:`slurm_demo` with both Nie cells, 20 steps in bf16 (the step the calibration has a packing
    figure for), ``gpu_share: 2`` and ``mps``: with ``gpu`` 1 their training jobs are packed two to a
    GPU; with 0 nothing is (the local reference)."""
    config = slurm_demo(repo_root, workdir, resources)
    config["experiments"]["nie2023"]["methods"] = reduced_demo(repo_root, workdir)["experiments"]["nie2023"][
        "methods"
    ]
    config["experiments"]["nie2023"]["training"]["precision"] = "bf16"
    config["training"].update(max_steps=20, eval_every=10, state_every=10, log_every=5)
    config["resources"].update(gpu=gpu, gpu_share=2, mps=True)
    return config


@pytest.mark.slow
def test_two_cells_sharing_a_gpu_train_in_one_allocation_under_one_mps_daemon_and_equal_a_local_run(
    repo_root, cluster, e2e_resources, tmp_path
):
    """``gpu_share: 2`` with ``mps``: the two training jobs go out as one SLURM job (group gpu_pack2)
    asking one job's CPUs and memory and both runtimes; each joins the allocation's MPS daemon (a stand-in
    records its calls), started and stopped around each job; the tables equal a local run's byte for byte.
    Torch cannot use this node's GPU: the training jobs get gpu=0 (--set-resources)."""
    cells = [f"nie2023/tiny-bert/{method}/seed42" for method in ("cl", "mpt")]
    local = tmp_path / "local"
    local_config = write(pack_demo(repo_root, local, e2e_resources, gpu=0), tmp_path / "local.yaml")
    metrics = [f"{local}/results/metrics/{cell}/senteval.json" for cell in cells]
    default = ["--workflow-profile", "profiles/default", "--cores", "2"]
    run_snakemake(repo_root, *default, "--configfile", local_config, "--", *metrics)
    build_report(Results(local / "results"), load(local_config))

    packed = tmp_path / "packed"
    packed_config = write(pack_demo(repo_root, packed, e2e_resources, gpu=1), tmp_path / "packed.yaml")
    bin_dir, calls_log = mps_standin.install(tmp_path / "mps")
    trained = [f"{packed}/results/checkpoints/{cell}/train_log.jsonl" for cell in cells]
    # the stand-in first on PATH (the cluster's client wrappers after it); the daemons' folders here
    env = {
        "PATH": f"{bin_dir}{os.pathsep}{slurm_env(cluster)['PATH']}",
        "CONTRASTLAB_GPU_LOCK_DIR": str(tmp_path / "locks"),
    }
    started = time.monotonic()
    args = ("--set-resources", "train:gpu=0", "--", *trained)
    output = run_through_slurm(repo_root, cluster, "slurm", packed_config, *args, env=env)
    seconds = time.monotonic() - started
    results = (packed / "results", local / "results")
    submitted = submissions(output)
    assert list(submitted.values()) == [PACK_GROUP], output[-5000:]  # both training jobs: one sbatch
    (slurm_id,) = submitted
    (job,) = [j for j in cluster.jobs() if j["JobId"] == slurm_id]
    assert job["JobState"] == "COMPLETED", job
    # one job at a time: one job's CPUs (threads 1) and memory, both jobs' 20 minutes
    assert (job["NumCPUs"], job["MinMemoryNode"], job["TimeLimit"]) == ("1", "1500M", "00:40:00"), job
    calls = mps_standin.calls(calls_log)
    assert [c["what"] for c in calls] == ["start", "quit", "start", "quit"], calls  # job by job
    assert {c["slurm_job"] for c in calls} == {slurm_id}, calls  # the allocation's own daemon
    assert len({c["pipe"] for c in calls}) == 1 and f"-{slurm_id}-" in calls[0]["pipe"], calls
    assert Path(calls[0]["pipe"]).parent.parent == tmp_path / "locks"
    for cell in cells:
        log = (packed / "results" / "logs" / "train" / f"{cell}.log").read_text()
        assert f"contrastlab: MPS daemon started: {Path(calls[0]['pipe']).parent}" in log, log[-2000:]
        assert same_weights(*(r / "checkpoints" / cell for r in results)), cell  # as profiles/default's

    # The rest here, as the local reference: encodings and probes of the packed run's checkpoints.
    evaluate = write(pack_demo(repo_root, packed, e2e_resources, gpu=0), tmp_path / "evaluate.yaml")
    targets = [f"{packed}/results/metrics/{cell}/senteval.json" for cell in cells]
    rest = run_snakemake(repo_root, *default, "--configfile", evaluate, "--", *targets)
    assert job_counts(rest).get("train") is None, rest[-3000:]  # trained through SLURM, not here
    build_report(Results(packed / "results"), load(evaluate))
    tables = same_tables(*results)
    print(f"SLURM pack: 2 training jobs in SLURM job {slurm_id}, {seconds:.0f} s; {len(tables)} tables equal")
