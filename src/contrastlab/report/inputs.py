"""The report's record of what made its numbers (its closing sections before the cost): the precision
every cell ran in, what the finished cells read (each backbone's revision, the data's digests) and the
code and environment of each training job (its commit, the contrastlab, torch and transformers versions,
the device it trained on)."""

from __future__ import annotations

import json
import os
from collections import Counter
from pathlib import Path

from contrastlab.artifacts import LOCK_NAME
from contrastlab.blocks import Heading, Paragraph, rows_table
from contrastlab.config import Grid
from contrastlab.paths import Results, read_metrics

__all__ = [
    "environment_rows",
    "input_blocks",
    "input_rows",
    "precision_blocks",
    "precision_label",
    "precision_rows",
    "training_records",
]


def precision_label(training: dict | None) -> str:
    """How a finished cell ran, from the ``training`` block of its metrics file: the resolved precision
    and, for fp32 runs on CUDA, whether the step's matmuls/convolutions were TF32 (``tf32``) or IEEE.

    >>> precision_label({"precision": "tf32", "tf32_matmul": True, "tf32_conv": True})
    'tf32 (TF32 matmul+conv)'
    >>> precision_label({"precision": "fp32", "tf32_matmul": False, "tf32_conv": False})
    'fp32 (IEEE)'
    """
    if not training or not training.get("precision"):
        return "unknown"
    name = training["precision"]
    flags = [training.get("tf32_matmul"), training.get("tf32_conv")]
    if None in flags:  # metrics written before the switches were recorded
        return name
    if all(flags):
        return f"{name} (TF32 matmul+conv)"
    return f"{name} (IEEE)" if name == "fp32" else name


def precision_rows(grid: Grid, metrics_root: str | os.PathLike) -> list[dict[str, str]]:
    """One row per (experiment, method): the precision the config gives its cells and the precision
    they ran in (the ``training`` block of their metrics files, :func:`precision_label`; auto and tf32
    run as fp32 off CUDA)."""
    rows: dict[tuple[str, str], dict[str, set]] = {}
    for cell in grid.every_cell():
        resolved = grid.settings(cell)
        row = rows.setdefault((cell.experiment, cell.method), {"config": set(), "ran": set(), "cells": set()})
        row["config"].add(resolved.get("precision") or "auto")
        row["cells"].add(cell.backbone)
        name = "vision.json" if grid.experiment(cell.experiment).track == "vision" else "senteval.json"
        path = Path(metrics_root) / cell.path / name
        if path.exists():
            row["ran"].add(precision_label(read_metrics(path).get("training")))
    return [
        {
            "experiment": experiment,
            "method": method,
            "backbones": ", ".join(sorted(r["cells"])),
            "config": ", ".join(sorted(r["config"])),
            "ran in": ", ".join(sorted(r["ran"])) or "not run",
        }
        for (experiment, method), r in rows.items()
    ]


def precision_blocks(grid: Grid, metrics_root: str | os.PathLike) -> list:
    """The report's "Precision of every cell": :func:`precision_rows` and what they say."""
    return [
        Heading(2, "Precision of every cell"),
        Paragraph(
            "config: the precision the config resolves for the cells (each paper's own unless "
            "`precision_override` is set); ran in: what the finished cells' training used, with the "
            "fp32 switches of its training step (IEEE or TF32; auto and tf32 run as fp32 off CUDA)."
        ),
        rows_table(precision_rows(grid, metrics_root)),
    ]


def _describe_backbone(record: dict) -> tuple[str, str]:
    source = record.get("source")
    if source == "hf_id":
        return f"`{record.get('hf_id')}`", f"commit `{record.get('revision')}`"
    if source == "package":
        return f"package `{record.get('package')}`", str(record.get("version"))
    if source == "path":
        copy = f"a copy of `{record['hf_id']}`" if record.get("hf_id") else ""
        return f"folder `{record.get('path')}`", copy
    return "random initialisation", f"seed {record.get('seed')}"


def input_rows(metrics_root: str | Path) -> list[dict[str, str]]:
    """One row per distinct input the finished cells read (backbones, corpus, SentEval and image data),
    from the ``meta.inputs`` of every metrics file, with how many cells read it."""
    cells: Counter[tuple] = Counter()
    for path in sorted(Path(metrics_root).rglob("*.json")):
        try:
            inputs = json.loads(path.read_text()).get("meta", {}).get("inputs", {})
        except (OSError, ValueError, AttributeError):
            continue
        for kind, value in sorted(inputs.items()):
            if kind == "backbone":
                what, version = _describe_backbone(value)
                weights = ", ".join(f"{d[:12]}…" for _, d in sorted(value.get("weights_sha256", {}).items()))
                weights = f"sha256 {weights}" if weights else ""
                row = {"input": "backbone", "what": what, "revision or version": version, "digest": weights}
            else:
                sha = value.get("sha256") or value.get("files_sha256")
                md5 = f"md5 {value['archive_md5']}" if "archive_md5" in value else ""
                digest = f"sha256 {sha[:16]}" if sha else md5
                what = value.get(kind) or value.get("images") or kind
                detail = f"{value['lines']:,} lines" if "lines" in value else str(value.get("source", ""))
                row = {"input": kind, "what": str(what), "revision or version": detail, "digest": digest}
            cells[tuple(row.items())] += 1  # every row has the same keys in the same order
    return [{**dict(row), "cells": str(n)} for row, n in cells.items()]


def training_records(results_dir: str | os.PathLike) -> list[tuple[str, dict]]:
    """``(cell, record)`` of every training job under the results' checkpoints: the last ``start`` event of
    its ``train_log.jsonl``, the trainer's own record of the job as it (last) started: its device and
    ``meta`` (:func:`contrastlab.provenance.run_metadata`: commit, uncommitted changes, package versions)."""
    root = Path(Results(results_dir).checkpoint())
    records = []
    for log in sorted(root.rglob("train_log.jsonl")):
        start = None
        for line in log.read_text(encoding="utf-8").splitlines():
            try:
                event = json.loads(line)
            except ValueError:
                continue  # a line cut by a kill: the events around it still count
            start = event if isinstance(event, dict) and event.get("event") == "start" else start
        if start is not None:
            records.append((log.parent.relative_to(root).as_posix(), start))
    return records


def environment_rows(results_dir: str | os.PathLike) -> list[dict[str, str]]:
    """One row per distinct commit (and uncommitted changes), package versions and device of the training
    jobs (:func:`training_records`), with the jobs that ran so, counted per experiment."""
    seen: dict[tuple, dict] = {}
    for cell, start in training_records(results_dir):
        meta, device = start.get("meta") or {}, start.get("device") or "?"
        versions = meta.get("versions") or {}
        sha = meta.get("git_sha")
        commit = f"`{sha[:12]}`" + (" + uncommitted changes" if meta.get("git_dirty") else "") if sha else "?"
        row = {
            "commit": commit,
            **{package: versions.get(package, "?") for package in ("contrastlab", "torch", "transformers")},
            "device": f"{device} ({start['device_name']})" if start.get("device_name") else device,
        }
        seen.setdefault(tuple(row.values()), {**row, "jobs": Counter()})["jobs"][cell.split("/")[0]] += 1
    for row in seen.values():
        row["training jobs"] = ", ".join(f"{name} ×{n}" for name, n in row.pop("jobs").items())
    return list(seen.values())


def input_blocks(
    metrics_root: str | Path, lock: str = LOCK_NAME, results_dir: str | os.PathLike | None = None
) -> list:
    """The report's "Inputs": :func:`input_rows` with where the ``lock`` is, then (with ``results_dir``)
    :func:`environment_rows`; nothing when neither has a row."""
    rows = input_rows(metrics_root)
    environment = environment_rows(results_dir) if results_dir is not None else []
    if not rows and not environment:
        return []
    blocks: list = [Heading(2, "Inputs")]
    if rows:  # a run of local data and offline backbones (make cpu, make demo) downloads nothing: no lock
        pinned = (
            f"Every download and hub revision is pinned in `{lock}` (commit it to share these inputs byte "
            "for byte)."
            if Path(lock).exists()
            else f"Nothing was downloaded or resolved on the hub (local data, offline backbones), so no "
            f"`{lock}` was written."
        )
        blocks += [
            Paragraph(
                "What the finished cells read, from their metrics files: each backbone's resolved revision "
                "(or package version) and weights' sha256, the corpus's and the evaluation data's digests. "
                + pinned
            ),
            rows_table(rows),
        ]
    if environment:
        blocks += [
            Paragraph(
                "The code and environment of every training job, from the record its trainer wrote as it "
                "started (the `start` event of its `train_log.jsonl`): the commit (and whether the working "
                "tree had uncommitted changes), the contrastlab, torch and transformers versions, and the "
                "device it trained on (its name); the jobs that ran so, per experiment."
            ),
            rows_table(environment),
        ]
    return blocks
