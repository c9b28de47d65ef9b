"""Version what the workflow produced with DVC, and hand a pulled copy back to Snakemake as finished.

Snakemake runs the workflow; DVC only versions its results, so the two never orchestrate the same DAG:

- :func:`freeze` (``make freeze CONFIG=<preset>``) ``dvc add``s what one preset produced, i.e. the
  results folder's checkpoints, model cards, metrics, state (data markers), figures, tables, report,
  timings and logs and the shared resources' data and backbones (:func:`frozen_paths`), records the
  config they came from (:data:`FREEZE_RECORD`) and ``dvc push``es them to the default remote. The
  ``.dvc`` pointers it writes beside them are committed to git.
- :func:`restore` (``make restore CONFIG=<preset>``, after ``dvc pull``) checks that the pulled copy
  belongs to this config and data, replays the DAG with ``snakemake --touch --forceall`` (which stamps
  every output in DAG order and records Snakemake's provenance of each for the current config, so that a
  later change of one hyperparameter still retrains exactly its cells) and renders the tables again from
  the pulled metrics; the dry run after it lists no job.

Training snapshots (``state/train``), the running-workflow record, downloaded archives and the
tokenised-corpus cache are not versioned (see ``.dvcignore``): none is needed to restore a finished run.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from contrastlab.workflow.recovery import running_workflow_marker

#: What :func:`freeze` versions, relative to the preset's ``results_dir`` and to ``resources_dir``.
RESULTS_OUTPUTS = (
    "checkpoints",
    "cards",  # the model cards (rule model_card), beside the checkpoints they describe
    "metrics",
    "search",  # the searches' selections (contrastlab.search), when the config has searches
    "state",
    "figures",
    "tables",
    "benchmarks",
    "logs",
    "report.md",
    "report.html",
)
RESOURCES_OUTPUTS = ("data", "models")

#: Written by :func:`freeze` under ``results_dir``: the config the frozen results came from.
FREEZE_RECORD = "state/freeze.json"

#: Config keys that do not change any result (where the data lie; job sizes): a restore on another
#: machine may differ in them.
_UNVERSIONED_KEYS = ("data", "resources")

_SNAKEMAKE = (sys.executable, "-m", "snakemake", "--workflow-profile", "profiles/local")


class VersioningError(RuntimeError):
    """A one-line reason why a freeze or a restore cannot go on."""


@dataclass(frozen=True)
class Preset:
    """A config file, validated, and the folders it writes to (relative to the repository root)."""

    configfile: str
    config: dict[str, Any]
    results_dir: Path
    resources_dir: Path


def load_preset(configfile: str | os.PathLike, root: str | os.PathLike = ".") -> Preset:
    """Validate ``configfile`` as the workflow does and locate its results and resources in ``root``;
    both must lie inside ``root`` (DVC versions nothing outside its repository)."""
    from contrastlab import config as cl_config

    root = Path(root).resolve()
    path = Path(configfile) if Path(configfile).is_absolute() else root / configfile
    try:
        config = cl_config.load(path)
    except cl_config.ConfigError as error:
        raise VersioningError(str(error)) from None
    folders = {}
    for key in ("results_dir", "resources_dir"):
        folder = (root / config[key]).resolve()
        if folder != root and root not in folder.parents:
            raise VersioningError(
                f"{key} {config[key]} of {configfile} lies outside the repository {root}; DVC versions "
                "only files inside it"
            )
        folders[key] = folder.relative_to(root)
    return Preset(str(configfile), config, folders["results_dir"], folders["resources_dir"])


def frozen_paths(preset: Preset, root: str | os.PathLike = ".") -> list[Path]:
    """The outputs of ``preset`` that exist under ``root``, as paths relative to it, in the order of
    :data:`RESULTS_OUTPUTS` then :data:`RESOURCES_OUTPUTS`."""
    wanted = [preset.results_dir / name for name in RESULTS_OUTPUTS]
    wanted += [preset.resources_dir / name for name in RESOURCES_OUTPUTS]
    return [path for path in wanted if (Path(root) / path).exists()]


def config_fingerprint(config: dict[str, Any]) -> dict[str, Any]:
    """The part of a validated config that the results depend on, as plain JSON values."""
    kept = {key: value for key, value in config.items() if key not in _UNVERSIONED_KEYS}
    return json.loads(json.dumps(kept, sort_keys=True, default=str))


def _dvc(args: Sequence[str], root: Path, *, capture: bool = False) -> subprocess.CompletedProcess:
    """This interpreter's DVC (the .venv's, never a ``dvc`` found on PATH) on ``args`` in ``root``."""
    env = dict(os.environ, DVC_NO_ANALYTICS="1")
    return subprocess.run(
        [sys.executable, "-m", "dvc", *args], cwd=root, env=env, text=True, capture_output=capture
    )


def _check(done: subprocess.CompletedProcess, what: str) -> None:
    if done.returncode != 0:
        detail = " ".join((done.stderr or "").split())[-300:] if done.stderr else "see its output above"
        raise VersioningError(f"{what} failed (exit {done.returncode}): {detail}")


def default_remote(root: str | os.PathLike = ".") -> str | None:
    """The name of the DVC repository's default remote in ``root``, or None when none is set."""
    root = Path(root)
    if not (root / ".dvc").is_dir():
        raise VersioningError(f"{root.resolve()} is not a DVC repository (no .dvc/ folder)")
    done = _dvc(["remote", "default"], root, capture=True)
    name = done.stdout.strip()
    return name if done.returncode == 0 and name else None


def freeze(configfile: str | os.PathLike, root: str | os.PathLike = ".", *, push: bool = True) -> list[Path]:
    """``dvc add`` every existing output of the preset ``configfile`` (:func:`frozen_paths`) after
    writing :data:`FREEZE_RECORD`, then ``dvc push`` them to the default remote; returns the ``.dvc``
    pointer files (relative to ``root``) to commit.

    Refuses, with a one-line :class:`VersioningError`, when no default remote is configured (checked
    first, before any hashing), when the preset has not run (no metrics file), or while a Snakemake run
    is using its results folder. Never call it from a Snakemake job: it versions the whole folder.
    """
    root = Path(root).resolve()
    preset = load_preset(configfile, root)
    if push and default_remote(root) is None:
        raise VersioningError(
            "no DVC remote configured: add one with `.venv/bin/dvc remote add -d store <folder or URL>` "
            "(commit .dvc/config), then freeze again"
        )
    results = root / preset.results_dir
    if not any((results / "metrics").rglob("*.json")):
        raise VersioningError(
            f"nothing to freeze: {preset.configfile} has not run yet ({preset.results_dir}/metrics holds "
            "no metrics file); run the workflow with this config first"
        )
    running = running_workflow_marker(results)
    if running.exists():
        raise VersioningError(
            f"a Snakemake run is using {preset.results_dir} ({running.relative_to(root)} exists; if it was "
            "killed, run the workflow again to finish it): freeze when it has ended"
        )
    record = {
        "configfile": preset.configfile,
        "config": config_fingerprint(preset.config),
        "data_markers": _data_markers(results),
    }
    record_path = results / FREEZE_RECORD
    record_path.parent.mkdir(parents=True, exist_ok=True)
    record_path.write_text(json.dumps(record, indent=1, sort_keys=True) + "\n", encoding="utf-8")
    paths = frozen_paths(preset, root)
    # Quiet: DVC would suggest `git add`ing the .gitignore files it writes, which .gitignore keeps out.
    _check(_dvc(["add", "--quiet", *map(str, paths)], root), "dvc add")
    pointers = [path.with_name(path.name + ".dvc") for path in paths]
    if push:
        _check(_dvc(["push", *map(str, pointers)], root), "dvc push")
    return pointers


def _data_markers(results: Path) -> dict[str, Any]:
    """``{name: content}`` of the data markers under ``results/state/data`` (what data a run used)."""
    folder = results / "state" / "data"
    return {p.name: json.loads(p.read_text()) for p in sorted(folder.glob("*.ready.json"))}


def _current_data_identity(config: dict[str, Any], marker: str) -> Any:
    """What the data behind ``marker`` (``senteval``, ``corpus``, ``images-<dataset>``) are under
    ``config``, in the form the data rules write into their marker."""
    from contrastlab.data.acquire import data_identity, image_data_identity

    what = marker.removesuffix(".ready.json")
    identity = (
        image_data_identity(config, what.removeprefix("images-"))
        if what.startswith("images-")
        else data_identity(config, what)
    )
    return json.loads(json.dumps(identity))


def check_restorable(preset: Preset, root: str | os.PathLike = ".") -> dict[str, Any]:
    """Check that the pulled copy of ``preset`` in ``root`` is complete and came from this config and
    these data; returns its freeze record. Raises :class:`VersioningError` naming what is wrong."""
    root = Path(root)
    results = root / preset.results_dir
    record_path = results / FREEZE_RECORD
    if not record_path.is_file():
        raise VersioningError(
            f"nothing to restore for {preset.configfile}: {preset.results_dir / FREEZE_RECORD} is missing; "
            "run `.venv/bin/dvc pull` first (and `make freeze` where the preset ran)"
        )
    record = json.loads(record_path.read_text(encoding="utf-8"))
    missing = [str(p) for p in _pointed_paths(preset, root) if not (root / p).exists()]
    if missing:
        raise VersioningError(f"not pulled yet: {', '.join(missing)}; run `.venv/bin/dvc pull` first")
    frozen, current = record["config"], config_fingerprint(preset.config)
    if frozen != current:
        keys = sorted(k for k in set(frozen) | set(current) if frozen.get(k) != current.get(k))
        raise VersioningError(
            f"{preset.configfile} differs from the config the results were frozen with in: "
            f"{', '.join(keys)}; restore with that config (the commit of the freeze), then change it"
        )
    for marker, content in record.get("data_markers", {}).items():
        if _current_data_identity(preset.config, marker) != content:
            raise VersioningError(
                f"the data of {preset.configfile} are not those the results were made with "
                f"({marker}: frozen {content}); point data.* at the same data"
            )
    return record


def _pointed_paths(preset: Preset, root: Path) -> list[Path]:
    """The outputs of ``preset`` that have a ``.dvc`` pointer in ``root`` (what ``dvc pull`` brings)."""
    wanted = [preset.results_dir / n for n in RESULTS_OUTPUTS] + [
        preset.resources_dir / n for n in RESOURCES_OUTPUTS
    ]
    return [p for p in wanted if (root / p.with_name(p.name + ".dvc")).is_file()]


def _snakemake(args: Sequence[str], root: Path, what: str) -> str:
    done = subprocess.run([*_SNAKEMAKE, *args], cwd=root, text=True, capture_output=True)
    output = done.stdout + done.stderr
    if done.returncode != 0:
        print(output[-4000:], file=sys.stderr)
        raise VersioningError(f"{what} failed (exit {done.returncode}); Snakemake's output is above")
    return output


def pending_jobs(dry_run_output: str) -> dict[str, int]:
    """``{rule: count}`` from the "Job stats" table of a Snakemake dry run (empty when nothing runs)."""
    if "Job stats:" not in dry_run_output:
        return {}
    counts = {}
    for line in dry_run_output.split("Job stats:", 1)[1].splitlines()[3:]:
        parts = line.split()
        if len(parts) != 2 or not parts[1].isdigit() or parts[0] == "total":
            break
        counts[parts[0]] = int(parts[1])
    return counts


def restore(configfile: str | os.PathLike, root: str | os.PathLike = ".") -> list[str]:
    """Make the pulled outputs of the preset ``configfile`` in ``root`` count as finished for Snakemake
    and render its tables and report again from the pulled metrics; returns the written tables' paths.

    Runs :func:`check_restorable`, then ``snakemake --touch --forceall`` (every job's outputs stamped in
    DAG order, its provenance recorded under ``.snakemake/`` for the current config), checks with a dry
    run that no job is left (a copy frozen from an unfinished run stops here, naming the jobs), then
    renders with ``snakemake --forcerun tables``, allowed to run the table rule only: nothing is
    trained or evaluated.
    """
    root = Path(root).resolve()
    preset = load_preset(configfile, root)
    check_restorable(preset, root)
    config_args = ["--configfile", str(configfile), "--cores", "1"]
    _snakemake([*config_args, "--touch", "--forceall"], root, "snakemake --touch --forceall")
    left = pending_jobs(_snakemake([*config_args, "-n"], root, "snakemake -n"))
    if left:
        jobs = ", ".join(f"{rule} {n}" for rule, n in left.items())
        raise VersioningError(
            f"the pulled copy of {preset.configfile} is not a finished run: Snakemake would still run "
            f"{jobs}; run the workflow to finish it"
        )
    _snakemake(
        [*config_args, "--forcerun", "tables", "--allowed-rules", "tables", "all"],
        root,
        "snakemake --forcerun tables",
    )
    return sorted(str(p.relative_to(root)) for p in (root / preset.results_dir / "tables").iterdir())
