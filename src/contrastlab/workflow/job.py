"""What every Snakemake script in ``scripts/`` does around its one call into the library: its job's label
and failure record, the retry policy, the training and evaluation job contexts (GPU claimed, stderr to the
rule's log, a failure recorded rather than lost), and which checkpoint an evaluation job scores."""

from __future__ import annotations

import contextlib
import json
import os
import sys
import traceback
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from contrastlab.config import Options
from contrastlab.config.data import DataConfig
from contrastlab.data.acquire import data_marker_path
from contrastlab.paths import CELL_FIELDS, Resources, Results, read_json, write_json
from contrastlab.provenance import note_inputs
from contrastlab.training.events import WandbRun, log_test_scores
from contrastlab.training.phases import close_summary, note_job_start
from contrastlab.workflow.failures import (
    NOT_RETRIED,
    cell_label,
    disk_full,
    failure_line,
    job_results_dir,
    snakemake_dict,
)
from contrastlab.workflow.finished import record_job
from contrastlab.workflow.gpus import job_device
from contrastlab.workflow.job_start import start_line, start_record
from contrastlab.workflow.recovery import die_with_workflow, slurm_job_noted, workflow_run


def job_label(snakemake: Any) -> str:
    """``rule train nie2023/bert-base/mpt/seed42``: the rule and its wildcards, for one-line errors."""
    cell = cell_label(snakemake_dict(snakemake, "wildcards"))
    return f"rule {getattr(snakemake, 'rule', '?')}" + (f" {cell}" if cell else "")


#: Beside a cell's metrics file when its training or evaluation failed (see :func:`logged_to`).
FAILURE_RECORD = "failed.json"


def failure_record(snakemake: Any) -> Path | None:
    """``<results_dir>/metrics/<experiment>/<backbone>/<method>/seed<N>/failed.json`` of a cell's job
    (``None`` for jobs of no cell: data, backbones, Pretrained rows). Derived from the wildcards rather
    than passed as a param, since a new param would rerun every finished cell."""
    wildcards = snakemake_dict(snakemake, "wildcards")
    if not set(CELL_FIELDS) <= set(wildcards):
        return None
    return Path(Results(job_results_dir(snakemake)).metrics(wildcards), FAILURE_RECORD)


#: Failures that a retry of the same job reproduces: a non-finite loss (NonFiniteLossError is a
#: FloatingPointError), memory exhaustion raised as an exception (the trainer's MemoryError, torch's
#: OutOfMemoryError), and a bad setting (ValueError). Any other failure (a lost node, a broken GPU, an
#: I/O error) may pass on another node or later, so a retry is left to run; a full disk does not
#: (:func:`is_deterministic_failure`).
DETERMINISTIC_FAILURES: tuple[type[BaseException], ...] = (FloatingPointError, MemoryError, ValueError)


def is_deterministic_failure(error: BaseException) -> bool:
    """Whether retrying the job would fail the same way (see :data:`DETERMINISTIC_FAILURES`)."""
    # torch.OutOfMemoryError (CUDA OOM) is a RuntimeError; matched by name so that torch is not imported.
    # A full disk (ENOSPC anywhere in the chain) fails again until space is freed: a new run then.
    return (
        isinstance(error, DETERMINISTIC_FAILURES)
        or any(cls.__name__ == "OutOfMemoryError" for cls in type(error).__mro__)
        or disk_full(error) is not None
    )


@contextlib.contextmanager
def training_job(snakemake: Any) -> Iterator[tuple[str, dict[str, str]]]:
    """The frame of a training job's script (:func:`_job`, its log appended to after C-level output was sent
    there, :func:`stderr_to_log`), with cuBLAS's deterministic workspace for a cell that asks for
    deterministic kernels (:func:`deterministic_cublas`); yields ``(device, the job's data locations)``; its
    summaries closed at its end (:func:`close_summaries`: the export and the record in their total)."""
    stderr_to_log(snakemake.log[0])
    with _job(snakemake, training=True) as device:
        yield device, job_data_locations(snakemake)


def evaluation_job(snakemake: Any) -> contextlib.AbstractContextManager[str]:
    """The frame of an evaluation job's script (``encode``, ``evaluate``, ``encode_vision``,
    ``evaluate_vision`` and the searches' twins, :func:`_job`); yields the job's device."""
    return _job(snakemake, training=False)


@contextlib.contextmanager
def _job(snakemake: Any, *, training: bool) -> Iterator[str]:
    """Library output to the job's log, a failure as one line (and a failure record, :func:`logged_to`),
    how the job started into its log, the job's device (:func:`job_device`: its own GPU, never the CPU of a
    node whose GPU is broken, or the CPU with ``resources.gpu: 0``), torch's threads = the rule's, its inputs
    noted for its provenance; yields the device; when the job ends, the size and sha256 of its weights or
    metrics file are recorded (:func:`~contrastlab.workflow.finished.record_job`), checked before a later run
    trusts them."""
    record, label = failure_record(snakemake), job_label(snakemake)
    with (
        slurm_job_noted(job_results_dir(snakemake), label, snakemake.output),  # a killed run's rerun waits
        logged_to(snakemake.log[0], label, append=training, failure_record=record, run=workflow_run()),
    ):
        print(start_line(), file=sys.stderr)  # warm or cold, and how long the start took, into the log
        note_job_start(start_record())  # the job's phases count from the process's start
        if training:
            deterministic_cublas(getattr(getattr(snakemake, "params", None), "settings", None) or {})
        device = job_device(snakemake)  # before torch touches CUDA
        import torch

        torch.set_num_threads(max(1, snakemake.threads))
        note_inputs(job_inputs(snakemake))  # run_metadata() records them in the checkpoint or metrics file
        yield device
        record_job(snakemake)
        if training:
            close_summaries(snakemake)


#: A training job's summary in its output folder, by the output's name: a sentence cell's, an image cell's.
SUMMARIES = {"model": "train_summary.json", "encoder": "settings.json"}


def close_summaries(snakemake: Any) -> None:
    """The phases of the job's summaries extended to its end
    (:func:`~contrastlab.training.phases.close_summary`)."""
    named = snakemake_dict(snakemake, "output")
    for name, summary in SUMMARIES.items():
        if name in named:
            close_summary(Path(named[name], summary))


def deterministic_cublas(settings: Mapping[str, Any]) -> None:
    """``CUBLAS_WORKSPACE_CONFIG`` set to cuBLAS's deterministic workspace for a cell whose ``settings``
    say ``deterministic: true``, unless the environment sets it already. cuBLAS reads the variable once,
    when CUDA first runs it, so a job sets it before it touches CUDA; the trainer only checks it
    (:func:`~contrastlab.training.capture.require_cublas_workspace`)."""
    if settings.get("deterministic"):
        # torch, which the training jobs' scripts have imported already; importing it starts no CUDA
        from contrastlab.training.capture import CUBLAS_DETERMINISTIC

        os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", CUBLAS_DETERMINISTIC)


def job_inputs(snakemake: Any) -> dict[str, Any]:
    """What a cell's job reads, for its provenance: the backbone's source record (hub revision, package
    version, weights' sha256; :func:`contrastlab.models.text.backbone_record`) and each data marker's
    content (the corpus's sha256 and lines, SentEval's pinned files). An evaluation job adds what the
    checkpoint it scores was trained on (the ``inputs`` of its ``train_summary.json``)."""
    # torch (models.text): loaded only when a job records its inputs, not by every script's import
    from contrastlab.models.text import backbone_record

    inputs: dict[str, Any] = {}
    named, wildcards = snakemake_dict(snakemake, "input"), snakemake_dict(snakemake, "wildcards")
    config = getattr(snakemake, "config", None) or {}
    model = named.get("model")
    summary = Path(str(model), "train_summary.json") if isinstance(model, str) else None
    if summary is not None and summary.is_file():
        inputs.update(json.loads(summary.read_text()).get("meta", {}).get("inputs", {}))
    if "backbone" in wildcards and "backbone" not in inputs:
        resources = config.get("resources_dir", "resources")
        record = backbone_record(Path(Resources(resources).backbone_dir(wildcards["backbone"])))
        if record is not None:
            inputs["backbone"] = record
    for name, path in named.items():
        if name.endswith("_ready") and isinstance(path, str) and Path(path).is_file():
            inputs[name.removesuffix("_ready")] = json.loads(Path(path).read_text())
    dataset = (config.get("experiments", {}).get(wildcards.get("experiment")) or {}).get("dataset")
    marker = Path(data_marker_path(config["results_dir"], f"images-{dataset}")) if dataset else None
    if marker and "images" not in inputs and marker.is_file():  # an image probe job reads the features only
        inputs["images"] = json.loads(marker.read_text())
    return inputs


def job_data_locations(snakemake: Any) -> dict[str, str]:
    """:meth:`contrastlab.config.data.DataConfig.locations` of the job's config. Jobs read where the data lie
    from the config rather than from a param, so that moving the data reruns no job (see data.smk)."""
    config = snakemake.config  # validated once, by rules/common.smk
    data = DataConfig(config)
    where = data.locations()
    wildcards = snakemake_dict(snakemake, "wildcards")
    dataset = wildcards.get("dataset") or config["experiments"].get(wildcards.get("experiment"), {}).get(
        "dataset"
    )
    if dataset:  # CIFAR-10 and CIFAR-100 may lie in folders of their own (data.cifar_root per dataset)
        where["images"] = data.images_root(dataset)
    return where


def events_dir_of(snakemake: Any) -> Path:
    """The training job's TensorBoard run folder, ``<results_dir>/tensorboard/<experiment>/<backbone>/
    <method>/seed<seed>`` (what ``make monitor`` shows). Read from the config and the wildcards rather
    than from a param, so that the folder's place reruns no finished cell."""
    return Path(Results(snakemake.config["results_dir"]).tensorboard(snakemake.wildcards))


def wandb_run_of(snakemake: Any) -> WandbRun | None:
    """The Weights & Biases run of the job's cell (config ``logging.wandb``), wandb's files under the
    results folder; None without the key or for a job that is no cell's."""
    config = snakemake.config
    return WandbRun.of(Options.of(config).wandb_project, snakemake.wildcards, config["results_dir"])


def log_job_test_scores(snakemake: Any, metrics: dict[str, Any]) -> dict[str, float]:
    """The evaluation job's test scores into its cell's TensorBoard run and W&B run
    (:func:`contrastlab.training.events.log_test_scores`); returns the scores logged."""
    results = Results(snakemake.config["results_dir"])
    return log_test_scores(metrics, snakemake.wildcards, results, wandb_run_of(snakemake))


def stderr_to_log(log_path: str | os.PathLike) -> None:
    """Send file descriptor 2 (C-level and library output: tqdm, torch warnings) to the job's log, and
    keep ``sys.stderr`` on the terminal for the one-line failure message :func:`logged_to` prints."""
    sys.stderr = os.fdopen(os.dup(2), "w", buffering=1)
    fd = os.open(log_path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    os.dup2(fd, 2)
    os.close(fd)


@contextlib.contextmanager
def logged_to(
    log_path: str | os.PathLike,
    label: str = "",
    *,
    append: bool = False,
    failure_record: str | os.PathLike | None = None,
    run: str | None = None,
) -> Iterator[None]:
    """Send stdout/stderr of the block to ``log_path``; a failure ends the job with one line.

    The traceback goes to the log only; stderr gets ``contrastlab: <label>: <Error>: <message> (log:
    <path>)`` and the process exits with status 1. ``label`` names the job (:func:`job_label`).
    ``failure_record``: a JSON file written on failure (job, error, log, whether a retry could help, ``run``)
    and removed when the job starts again, so the tables show the cell as "failed" while ``--keep-going``
    finishes the others. When the record says this job failed in the same invocation (``run``,
    :func:`workflow_run`) for a reason a retry reproduces (:func:`is_deterministic_failure`), this attempt
    is Snakemake's retry: it prints the same line and exits at once instead of failing again for hours; a
    new invocation runs the job again.
    """
    Path(log_path).parent.mkdir(parents=True, exist_ok=True)
    if failure_record is not None:
        previous = read_json(failure_record)
        if (
            run is not None
            and previous.get("run") == run
            and previous.get("job") == label
            and previous.get("retry_can_help") is False
        ):
            # Snakemake removed the failed attempt's log before this retry: put its traceback back.
            with open(log_path, "a") as log:
                log.write(previous.get("traceback", ""))
                print(f"{NOT_RETRIED}{previous['error']}", file=log)
            print(previous["error"], file=sys.stderr, flush=True)
            raise SystemExit(1)
        Path(failure_record).unlink(missing_ok=True)
    die_with_workflow()
    real_stderr = sys.stderr
    try:
        log = open(log_path, "a" if append else "w", buffering=1)
    except OSError as error:  # a full disk (P9): the line still reaches the terminal
        print(failure_line(error, label, log_path), file=real_stderr, flush=True)
        raise SystemExit(1) from None
    try:
        with contextlib.redirect_stdout(log), contextlib.redirect_stderr(log):
            try:
                yield
            except Exception as error:
                _fail(error, label, log_path, log, real_stderr, failure_record, run)
            except KeyboardInterrupt:
                _interrupted(label, log_path, log, real_stderr)
                raise
    finally:
        with contextlib.suppress(OSError):  # closing flushes: on a full disk, the exit status stands
            log.close()


def _interrupted(label, log_path, log, stderr) -> None:
    """A job stopped by Ctrl-C (:func:`logged_to`): its line on ``stderr``, the traceback and the line in
    ``log``; the interrupt goes on without a traceback on the terminal, so the process still ends killed
    by SIGINT (a cold job as Python ends one, a warm fork as :mod:`contrastlab.workflow.warm` does)."""
    where = f"{label}: " if label else ""
    line = f"contrastlab: {where}interrupted; run the same command again to go on (log: {log_path})"
    print(line, file=stderr, flush=True)
    with contextlib.suppress(OSError):
        log.write(traceback.format_exc() + line + "\n")
    hook = sys.excepthook
    sys.excepthook = lambda kind, *rest: None if issubclass(kind, KeyboardInterrupt) else hook(kind, *rest)


def _fail(error, label, log_path, log, stderr, failure_record, run) -> None:
    """End a failed job (:func:`logged_to`): its line on ``stderr`` first (the log and the record may be
    on a full disk), the traceback and the line at the end of ``log`` (the workflow prints the line again
    last, :mod:`contrastlab.workflow.failures`), the failure record; exit status 1."""
    line = failure_line(error, label, log_path)
    print(line, file=stderr, flush=True)
    with contextlib.suppress(OSError):
        log.write(traceback.format_exc() + line + "\n")
    if failure_record is not None:
        record = {"job": label, "error": line, "log": str(log_path), "run": run}
        record.update(traceback=traceback.format_exc(), retry_can_help=not is_deterministic_failure(error))
        with contextlib.suppress(OSError):
            write_json(failure_record, record)
    raise SystemExit(1) from None


def evaluated_model(snakemake: Any) -> tuple[str, dict[str, Any] | None]:
    """The checkpoint an evaluation job (``encode``/``evaluate``, or a search's ``search_encode``/
    ``search_evaluate``) scores, and for a search the winner's record: its ``input.model``, else the
    winner named in ``input.selection`` (the search's last stage, contrastlab.search)."""
    if "selection" not in snakemake.input.keys():
        return str(snakemake.input.model), None
    selection = json.loads(Path(snakemake.input.selection).read_text(encoding="utf-8"))
    keys = ("winner", "winner_dev", "winner_settings", "winner_model", "metric", "stage")
    return selection["winner_model"], {key: selection[key] for key in keys}
