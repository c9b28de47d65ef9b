"""The SLURM profiles' GPU requests on a real single-node SLURM (tests/e2e/slurm_cluster.py), and a
diverged cell's retry; a module with a cluster of its own (overrides and polling knobs: test_slurm.py's)."""

from __future__ import annotations

import concurrent.futures
import json
import re
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch

from .conftest import linked_copy, reduced_demo, run_snakemake, snakemake_process, write
from .test_slurm import PROBE_GROUP, run_through_slurm, slurm_demo, submissions

PROFILES = ("slurm", "slurm-gres")
SCHEDULE_FIRST = 14  # a long module: tests/conftest.py starts the highest numbers first

# Test-only, for a run whose one job fails: the plugin adds 10 s to the wait after each status check
# that finds no job succeeded (a failed one counts as none) and sleeps out that wait before Snakemake
# exits. From FAST_POLLING's 2 s the encoding's failure (about 15 s after its submission) is seen at the
# third check (~36 s) and the exit waits 32 s more; from 8 s, at the second (~18-26 s) and 28 s more.
FAILING_JOB_POLLING = [
    "--slurm-init-seconds-before-status-checks",
    "8",
    "--seconds-between-status-checks",
    "8",
]


@pytest.mark.slow
def test_a_nan_loss_is_not_retried_for_its_full_length(repo_root, e2e_resources, tmp_path):
    """Snakemake's retry of a diverged cell (here the local executor with --retries 1, as the SLURM
    profile retries) stops at once with the failure's line, its log keeping the first traceback."""
    config = reduced_demo(repo_root, tmp_path)
    config.update(oar_synthetic=None, resources_dir=str(e2e_resources))
    config["experiments"]["nie2023"]["methods"]["mpt"]["lr"] = 1.0e12  # NaN within 2 steps
    configfile = write(config, tmp_path / "c.yaml")
    target = tmp_path / "results/checkpoints/nie2023/tiny-bert/mpt/seed42/train_log.jsonl"
    profile = ["--workflow-profile", "profiles/default", "--cores", "2", "--configfile", configfile]
    done = snakemake_process(repo_root, *profile, "--retries", "1", "--", str(target))
    out = done.stdout + done.stderr
    lines = [line for line in out.splitlines() if line.startswith("contrastlab: rule train")]
    # The attempt's line, the refused retry's, and the same line again as the output's last.
    assert done.returncode == 1 and len(lines) == 3 and len(set(lines)) == 1, out[-3000:]
    assert [line for line in done.stderr.splitlines() if line.strip()][-1] == lines[0], out[-3000:]
    assert "NonFiniteLossError" in lines[0] and "Trying to restart job" in out
    log = (tmp_path / "results/logs/train/nie2023/tiny-bert/mpt/seed42.log").read_text()
    assert "NonFiniteLossError" in log and log.endswith(
        f"contrastlab: not retried (a retry fails the same way): {lines[0]}\n"
    )
    assert log.count("Traceback") == 1, log


# --- a real SLURM -------------------------------------------------------------------------------------


@pytest.mark.slow
def test_the_encoding_gets_the_gpu_and_the_probe_job_none(repo_root, cluster, e2e_resources, tmp_path):
    """The fake GPU goes to the encoding job (``--gpus=1``, profiles/slurm; ``--gres=gpu:1``,
    profiles/slurm-gres), which torch cannot use: it stops with the GPU line, not encoding on the CPU. The
    probe job asks for none: with the embeddings made here it completes (profiles/slurm only; slurm-gres's
    probe requests are read off its dry run, test_dryrun.py). The two profiles' runs go at once, each from
    a working directory of its own (most of a failing run is the plugin's waiting, FAILING_JOB_POLLING)."""
    if torch.cuda.is_available():
        pytest.skip("checks the error on a machine without a usable GPU")
    runs = {}
    for profile in PROFILES:
        folder = tmp_path / profile
        folder.mkdir()
        config = slurm_demo(repo_root, folder, e2e_resources)
        config["resources"]["gpu"] = 1
        runs[profile] = SimpleNamespace(
            profile=profile,
            folder=folder,
            config=config,
            configfile=write(config, folder / "c.yaml"),
            target=f"{folder}/results/metrics/pretrained/tiny-bert/senteval.json",
            workdir=repo_root if profile == "slurm" else linked_copy(folder / "repo"),
        )
    first = runs["slurm"]
    run_snakemake(
        repo_root,
        *("--workflow-profile", "profiles/default", "--cores", "2", "--configfile", first.configfile),
        *("--omit-from", "encode_pretrained", "--", first.target),
    )

    def through_slurm(run) -> str:
        # No retry here (--retries 0): the retry of a GPU failure is the unit tests' business.
        args = (*FAILING_JOB_POLLING, "--retries", "0", "--", run.target)
        return run_through_slurm(run.workdir, cluster, run.profile, run.configfile, *args, check=False)

    with concurrent.futures.ThreadPoolExecutor(len(runs)) as pool:
        outputs = dict(zip(runs, pool.map(through_slurm, runs.values()), strict=True))
    for profile, output in outputs.items():
        submitted = submissions(output)
        assert list(submitted.values()) == ["encode_pretrained"], (profile, output[-5000:])
        jobs = [j for j in cluster.jobs() if j["JobId"] in submitted]
        assert len(jobs) == 1, jobs
        # --gpus=1 is a request per job, --gres=gpu:1 one per node.
        tres = "TresPerJob" if profile == "slurm" else "TresPerNode"
        assert jobs[0].get(tres) == "gres:gpu:1", jobs[0]
        assert jobs[0]["JobState"] == "FAILED", jobs[0]
        logs = "".join(
            Path(p).read_text() for p in re.findall(r"\(log: (\S+?)\)\.", output) if Path(p).exists()
        )
        line = (
            "contrastlab: rule encode_pretrained tiny-bert: GpuUnavailableError: this job asked for 1 GPU(s)"
        )
        assert line in output + logs, (profile, output[-5000:])
        assert not Path(runs[profile].target).exists()

    # The embeddings, encoded on this machine's CPU (a target of their own: Snakemake keeps a temp
    # output that was asked for), then the same evaluation through SLURM: only its probe job is left.
    embeddings = f"{first.folder}/results/state/embeddings/pretrained/tiny-bert"
    resources = {**first.config["resources"], "gpu": 0}
    on_cpu = write({**first.config, "resources": resources}, first.folder / "cpu.yaml")
    default = ("--workflow-profile", "profiles/default", "--cores", "1")
    run_snakemake(repo_root, *default, "--configfile", on_cpu, "--", embeddings)
    output = run_through_slurm(
        repo_root, cluster, first.profile, first.configfile, "--retries", "0", "--", first.target
    )
    submitted = submissions(output)
    assert list(submitted.values()) == [PROBE_GROUP], output[-5000:]  # a group of one probe job
    assert re.findall(r"^\s*rule (\w+):$", output, re.M) == ["evaluate_pretrained"], output[-5000:]
    probe = next(j for j in cluster.jobs() if j["JobId"] in submitted)
    assert probe["JobState"] == "COMPLETED", probe
    assert "gpu" not in probe.get("TresPerJob", "") + probe.get("TresPerNode", ""), probe
    metrics = json.loads(Path(first.target).read_text())
    assert metrics["encoding"]["device"] == "cpu" and metrics["scores"], metrics["encoding"]
    assert not Path(embeddings).exists()  # temp: deleted once the probe job has read it
