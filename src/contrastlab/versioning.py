"""Run a preset under DVC, version what it produced, and hand a pulled copy back to Snakemake as finished
(docs/reproduction.md, "Versioning results with DVC").

Snakemake owns the DAG; DVC sees each preset as one ``always_changed`` stage, ``reproduce@<preset>``,
whose command (:func:`reproduce`) is the Snakemake run of that preset and whose outputs are its results
folders (:data:`RESULTS_OUTPUTS`), the headline numbers (:func:`summary_path`) and its figures' PNGs
(:func:`plots_path`), with :data:`FREEZE_RECORD`, the config they came from. ``dvc exp run -S`` sets keys
of :data:`PARAMS_FILE`, an overlay on the preset's config; ``-S`` on a config file itself is undone and
refused (:func:`check_configs_untouched`). :func:`freeze` (``make freeze``) versions a finished run and the
shared resources; :func:`restore` (``make restore``) checks that the pulled copy belongs to this config
and data and replays the DAG with ``snakemake --touch --forceall``, so a later change of one
hyperparameter retrains exactly its cells.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from contrastlab import config as cl_config
from contrastlab.config.data import DataConfig
from contrastlab.paths import Results, atomic_dir, read_yaml, write_json
from contrastlab.workflow.recovery import run_records

#: The outputs each ``reproduce@<preset>`` stage versions, relative to its ``results_dir``; a folder a
#: preset writes nothing to is created empty, so that DVC never fails a finished run on a missing output.
RESULTS_OUTPUTS = (
    "checkpoints",
    "cards",  # the model cards make cards and make publish wrote (empty until asked for)
    "mteb",  # MTEB's results and the bridge of each scored checkpoint (rule mteb; empty when off)
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
#: What :func:`freeze` ``dvc add``s under ``resources_dir``: shared by the presets, so no stage's output.
RESOURCES_OUTPUTS = ("data", "models")

#: Written under ``results_dir`` by every run of the stage: the config the versioned results came from.
FREEZE_RECORD = "state/freeze.json"
#: The overlay ``dvc exp run -S`` sets; merged over every preset's config by the stage.
PARAMS_FILE = "params.yaml"
#: The stage of ``dvc.yaml`` that runs a preset, one ``reproduce@<name>`` per entry of its ``foreach``.
STAGE = "reproduce"
#: Each preset's summary (``<name>.json``, in git rather than DVC's cache: a preset that has not run is no
#: file, not a missing output) and its PNGs (``<name>/``); dvc.yaml's ``metrics`` and ``plots`` read them.
SUMMARY_DIR = "summary"
PLOTS_DIR = "results/plots"

#: Config keys that do not change any result (where the data lie; job sizes): a restore on another
#: machine may differ in them.
_UNVERSIONED_KEYS = ("data", "resources")
#: Rules that only render: a params change that leaves only these to run changed no cell.
_RENDERING_ONLY = frozenset({"all", "tables"})

_SNAKEMAKE = (sys.executable, "-m", "snakemake", "--workflow-profile", "profiles/local")


class VersioningError(RuntimeError):
    """A one-line reason why a run, a freeze or a restore cannot go on."""


@dataclass(frozen=True)
class Preset:
    """A config file with the params overlay, validated, and the folders it writes to (relative to the
    repository root)."""

    configfile: str
    config: dict[str, Any]
    results_dir: Path
    resources_dir: Path
    overlay: dict[str, Any] = field(default_factory=dict)

    @property
    def snakemake_args(self) -> list[str]:
        """``--configfile`` and the overlay as ``--config KEY=VALUE`` (Snakemake merges it key by key)."""
        return ["--configfile", self.configfile, *overlay_args(self.overlay)]

    def fingerprint(self) -> dict[str, Any]:
        """The part of the validated config that the results depend on, as plain JSON values."""
        kept = {key: value for key, value in self.config.items() if key not in _UNVERSIONED_KEYS}
        return json.loads(json.dumps(kept, sort_keys=True, default=str))

    def data_identity(self, marker: str) -> Any:
        """What the data behind ``marker`` (``senteval``, ``corpus``, ``images-<dataset>``) are under this
        preset's config, in the form the data rules write into their marker."""
        what = marker.removesuffix(".ready.json")
        data = DataConfig(self.config)
        identity = (
            data.image_identity(what.removeprefix("images-"))
            if what.startswith("images-")
            else data.identity(what)
        )
        return json.loads(json.dumps(identity))


def _drop_nulls(tree: Any) -> Any:
    if not isinstance(tree, Mapping):
        return tree
    kept = {key: _drop_nulls(value) for key, value in tree.items() if value is not None}
    return {key: value for key, value in kept.items() if value != {}}


def params_overlay(root: str | os.PathLike = ".") -> dict[str, Any]:
    """The settings of ``root``'s :data:`PARAMS_FILE` that are set (empty/null: the preset's own value), read
    as DVC writes it (YAML 1.2: ``1e-05`` is a number); empty when there is no such file."""
    from dvc.utils.serialize import loads_yaml

    path = Path(root) / PARAMS_FILE
    if not path.is_file():
        return {}
    data = loads_yaml(path.read_text(encoding="utf-8")) or {}
    if not isinstance(data, Mapping):
        raise VersioningError(f"{PARAMS_FILE} must hold a mapping of config keys, got {type(data).__name__}")
    return _drop_nulls(data)


def overlay_args(overlay: Mapping[str, Any]) -> list[str]:
    """``--config KEY=VALUE ...`` for each top-level key of ``overlay`` (VALUE in YAML flow style)."""
    if not overlay:
        return []
    # safe_dump ends a lone scalar with the document end marker "...": not part of the value
    values = [
        yaml.safe_dump(v, default_flow_style=True, width=1 << 20).removesuffix("...\n")
        for v in overlay.values()
    ]
    return ["--config", *(f"{key}={value.strip()}" for key, value in zip(overlay, values, strict=True))]


def load_preset(
    configfile: str | os.PathLike, root: str | os.PathLike = ".", overlay: Mapping[str, Any] | None = None
) -> Preset:
    """Validate ``configfile`` with ``overlay`` (default: :func:`params_overlay`) merged over it, as the
    stage's Snakemake run does, and locate its results and resources in ``root``; both must lie inside
    ``root`` (DVC versions nothing outside its repository)."""
    root = Path(root).resolve()
    overlay = dict(params_overlay(root) if overlay is None else overlay)
    path = Path(configfile) if Path(configfile).is_absolute() else root / configfile
    try:
        config = cl_config.load(path, overlay)
    except cl_config.ConfigError as error:
        where = f" with {PARAMS_FILE}'s {', '.join(_flatten(overlay))}" if overlay else ""
        raise VersioningError(f"{configfile}{where}: {error}") from None
    folders = {}
    for key in ("results_dir", "resources_dir"):
        folder = (root / config[key]).resolve()
        if folder != root and root not in folder.parents:
            raise VersioningError(
                f"{key} {config[key]} of {configfile} lies outside the repository {root}; DVC versions "
                "only files inside it"
            )
        folders[key] = folder.relative_to(root)
    return Preset(str(configfile), config, folders["results_dir"], folders["resources_dir"], overlay)


def preset_stages(root: str | os.PathLike = ".") -> dict[str, dict[str, str]]:
    """``{name: {"config": ..., "results": ...}}``: the presets ``dvc.yaml``'s stage :data:`STAGE`
    runs, in its order."""
    path = Path(root) / "dvc.yaml"
    stages = (read_yaml(path) or {}).get("stages") or {}
    return dict((stages.get(STAGE) or {}).get("foreach") or {})


def stage_for(configfile: str | os.PathLike, root: str | os.PathLike = ".") -> str:
    """``reproduce@<name>``, the stage of ``dvc.yaml`` that runs ``configfile``."""
    wanted = Path(os.path.normpath(configfile))
    stages = preset_stages(root)
    for name, item in stages.items():
        if Path(os.path.normpath(item["config"])) == wanted:
            return f"{STAGE}@{name}"
    known = ", ".join(item["config"] for item in stages.values()) or "none"
    raise VersioningError(
        f"{configfile} has no stage in dvc.yaml (presets with one: {known}); add it to the foreach of "
        f"stage {STAGE} there (config.yaml and config/cpu.yaml have a line to uncomment)"
    )


def preset_name(configfile: str | os.PathLike, root: str | os.PathLike = ".") -> str:
    """``demo`` for ``config/demo.yaml``: the key of ``configfile``'s stage (:func:`stage_for`)."""
    return stage_for(configfile, root).split("@", 1)[1]


def summary_path(name: str) -> Path:
    """The headline summary of the preset ``name`` (:func:`contrastlab.tables.summary.summary`)."""
    return Path(SUMMARY_DIR) / f"{name}.json"


def plots_path(name: str) -> Path:
    """The folder of the PNGs of the preset ``name``'s figures (:func:`copy_figure_images`)."""
    return Path(PLOTS_DIR) / name


def _flatten(tree: Any, prefix: str = "") -> dict[str, Any]:
    if not isinstance(tree, Mapping) or not tree:
        return {prefix: tree}
    flat: dict[str, Any] = {}
    for key, value in tree.items():
        flat.update(_flatten(value, f"{prefix}.{key}" if prefix else str(key)))
    return flat


# --- the stage's command ---------------------------------------------------------------------------------


def _git(root: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(["git", *args], cwd=root, capture_output=True)


def _take_changes(node: dict, target: Mapping[str, Any]) -> None:
    """Make ``node`` equal to ``target``, replacing only the values that differ (as Hydra's overrides do)."""
    for key in [key for key in node if key not in target]:
        del node[key]
    for key, value in target.items():
        if isinstance(node.get(key), dict) and isinstance(value, Mapping):
            _take_changes(node[key], value)
        elif key not in node or node[key] != value:
            node[key] = value


def _set_param_rewrite(baseline: str, current: str) -> bool:
    """Whether ``current`` is what ``dvc exp run -S`` writes when it sets keys of ``baseline``: DVC's
    ``apply_overrides`` (the baseline read for update, its values with the changed ones set, merged back
    and dumped: every list in block style) replayed with the changes ``current`` holds. A baseline that
    is already in that form gives no sign of DVC: an edit of its values is taken as the user's."""
    from dvc.utils.collections import merge_dicts, remove_missing_keys, to_omegaconf
    from dvc.utils.serialize import dumps_yaml, loads_yaml, parse_yaml_for_update
    from omegaconf import OmegaConf

    try:
        original, target = parse_yaml_for_update(baseline, "baseline"), loads_yaml(current)
    except Exception:  # not YAML DVC can read: not DVC's rewrite either
        return False
    if not isinstance(original, dict) or not isinstance(target, dict) or dumps_yaml(original) == baseline:
        return False
    values = OmegaConf.to_object(OmegaConf.create(to_omegaconf(original), flags={"allow_objects": True}))
    _take_changes(values, target)
    merge_dicts(original, values)
    remove_missing_keys(original, values)
    return dumps_yaml(original) == current


def check_configs_untouched(root: str | os.PathLike, baseline_rev: str) -> None:
    """Under ``dvc exp run``: undo what ``-S <config file>:<key>=<value>`` did to a config file (DVC
    applies it to any YAML file, rewriting it whole: flow lists to blocks, comments moved) and refuse in
    one line naming the keys. An edit of the user's own is left alone (it is part of the experiment)."""
    from dvc.utils.serialize import loads_yaml

    root = Path(root)
    listed = _git(root, "ls-tree", "-r", "--name-only", baseline_rev, "--", "config.yaml", "config")
    rewritten, changes = [], []
    for name in listed.stdout.decode().split():
        if not name.endswith((".yaml", ".yml")) or not (root / name).is_file():
            continue
        current = (root / name).read_text(encoding="utf-8")
        baseline = _git(root, "show", f"{baseline_rev}:{name}").stdout.decode()
        if current == baseline or not _set_param_rewrite(baseline, current):
            continue
        rewritten.append(name)
        (root / name).write_text(baseline, encoding="utf-8")
        before, after = _flatten(loads_yaml(baseline)), _flatten(loads_yaml(current))
        changes += [f"{key}={after.get(key)}" for key in after if before.get(key) != after.get(key)]
    if not rewritten:
        return
    example = changes[0] if changes else "KEY=VALUE"
    raise VersioningError(
        f"`dvc exp run -S <config file>:...` rewrote {', '.join(rewritten)} whole; restored it, nothing "
        f"ran. Set the value in {PARAMS_FILE} instead: dvc exp run -S '{example}' (a key {PARAMS_FILE} "
        "does not list takes a leading +)"
    )


def _check_overlay_changes_a_cell(preset: Preset, root: Path) -> None:
    """Refuse a params overlay, new since the last run, that leaves Snakemake nothing to do but render the
    tables: it changes no cell (it repeats the preset's value, or a cell's own setting wins over
    ``training.*``), and a run would train nothing."""
    record = root / preset.results_dir / FREEZE_RECORD
    before = json.loads(record.read_text(encoding="utf-8")).get("overlay") if record.is_file() else None
    if not preset.overlay or before is None or before == preset.overlay:
        return
    left = pending_jobs(_snakemake([*preset.snakemake_args, "-n"], root, "snakemake -n"))
    if not set(left) - _RENDERING_ONLY:
        keys = ", ".join(f"{k}={v}" for k, v in _flatten(preset.overlay).items())
        raise VersioningError(
            f"{PARAMS_FILE} sets {keys}, which changes no cell of {preset.configfile} (the preset's own "
            "value, or one each cell sets itself): nothing would train. Set the cell's own key in the "
            f"config, or reset {PARAMS_FILE} (git checkout {PARAMS_FILE})"
        )


def copy_figure_images(figures_dir: Path, plots_dir: Path) -> list[Path]:
    """Put the PNGs under ``figures_dir`` (and nothing else: DVC cannot draw the PDFs, and the figures'
    CSVs have no x/y it could guess) into ``plots_dir``, replacing what it held; returns the copies."""
    with atomic_dir(plots_dir) as tmp:
        tmp.mkdir()
        for png in sorted(figures_dir.rglob("*.png")) if figures_dir.is_dir() else []:
            target = tmp / png.relative_to(figures_dir)
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(png, target)
    return sorted(plots_dir.rglob("*.png"))


def reproduce(configfile: str | os.PathLike, root: str | os.PathLike = ".") -> Preset:
    """The command of the stage ``reproduce@<name>``: Snakemake on ``configfile`` with the params overlay,
    then :data:`FREEZE_RECORD`, the summary and the figures' PNGs, and the output folders the preset wrote
    none of. Under ``dvc exp run`` it first undoes and refuses a ``-S`` on a config file."""
    # pandas (tables.summary): loaded only by a reproduce, not by freeze or restore
    from contrastlab.tables.summary import summary

    root = Path(root).resolve()
    name = preset_name(configfile, root)
    if baseline := os.environ.get("DVC_EXP_BASELINE_REV"):
        check_configs_untouched(root, baseline)
    preset = load_preset(configfile, root)
    _check_overlay_changes_a_cell(preset, root)
    done = subprocess.run([*_SNAKEMAKE, *preset.snakemake_args], cwd=root)  # its output is the user's
    if done.returncode != 0:
        raise VersioningError(
            f"snakemake failed on {preset.configfile} (exit {done.returncode}; its output is above): "
            "nothing is versioned"
        )
    results = root / preset.results_dir
    for output in RESULTS_OUTPUTS:
        if "." not in output:  # a folder
            (results / output).mkdir(parents=True, exist_ok=True)
        elif not (results / output).is_file():
            raise VersioningError(
                f"snakemake finished without {preset.results_dir / output}: nothing is versioned"
            )
    write_json(results / FREEZE_RECORD, _record(preset, results))
    layout = Results(results)
    write_json(root / summary_path(name), summary(preset.config, Path(layout.metrics())))
    copy_figure_images(Path(layout.figures), root / plots_path(name))
    return preset


def _record(preset: Preset, results: Path) -> dict[str, Any]:
    """What :func:`check_restorable` holds a pulled copy to: the config and what its data are (for each
    data marker the run wrote, the data's identity under this config)."""
    markers = sorted(p.name for p in Path(Results(results).state("data")).glob("*.ready.json"))
    return {
        "configfile": preset.configfile,
        "overlay": preset.overlay,
        "config": preset.fingerprint(),
        "data": {marker: preset.data_identity(marker) for marker in markers},
    }


# --- freeze and restore ----------------------------------------------------------------------------------


def _dvc(args: Sequence[str], root: Path, *, capture: bool = False) -> subprocess.CompletedProcess:
    """This interpreter's DVC (the .venv's, never a ``dvc`` found on PATH) on ``args`` in ``root``."""
    env = dict(os.environ, DVC_NO_ANALYTICS="1")
    return subprocess.run(
        [sys.executable, "-m", "dvc", *args], cwd=root, env=env, text=True, capture_output=capture
    )


def _check(done: subprocess.CompletedProcess, what: str) -> None:
    if done.returncode != 0:  # a step run without capture (every caller's): its output is above
        raise VersioningError(f"{what} failed (exit {done.returncode}): see its output above")


def freeze(configfile: str | os.PathLike, root: str | os.PathLike = ".", *, push: bool = True) -> list[Path]:
    """Version a finished run of the preset ``configfile``: ``dvc repro`` its stage (nothing left to
    run; the outputs go to DVC's cache), ``dvc add`` the shared resources (those of
    :data:`RESOURCES_OUTPUTS` that exist) and ``dvc push`` both; returns the files to commit, relative to
    ``root``.

    Refuses in one line (:class:`VersioningError`) without a default remote (checked before any hashing),
    a stage in ``dvc.yaml``, a metrics file, or with jobs left or a Snakemake run using the results folder.
    Never call it from a Snakemake job: it versions the whole folder.
    """
    root = Path(root).resolve()
    preset = load_preset(configfile, root)
    if push:
        if not (root / ".dvc").is_dir():
            raise VersioningError(f"{root} is not a DVC repository (no .dvc/ folder)")
        remote = _dvc(["remote", "default"], root, capture=True)  # the default remote's name, if set
        if remote.returncode != 0 or not remote.stdout.strip():
            raise VersioningError(
                "no DVC remote configured: add one with `.venv/bin/dvc remote add -d store <folder or URL>` "
                "(commit .dvc/config), then freeze again"
            )
    stage = stage_for(configfile, root)
    results = root / preset.results_dir
    if not any(Path(Results(results).metrics()).rglob("*.json")):
        raise VersioningError(
            f"nothing to freeze: {preset.configfile} has not run yet ({preset.results_dir}/metrics holds "
            f"no metrics file); run it first: .venv/bin/dvc repro {stage}"
        )
    if running := run_records(results):
        raise VersioningError(
            f"a Snakemake run is using {preset.results_dir} ({running[0].relative_to(root)} exists; if it "
            "was killed, run the workflow again to finish it): freeze when it has ended"
        )
    if left := pending_jobs(_snakemake([*preset.snakemake_args, "-n"], root, "snakemake -n")):
        jobs = ", ".join(f"{rule} {n}" for rule, n in left.items())
        raise VersioningError(
            f"{preset.configfile} is not a finished run: Snakemake would still run {jobs}; finish it "
            f"(.venv/bin/dvc repro {stage}), then freeze"
        )
    _check(_dvc(["repro", stage], root), f"dvc repro {stage}")
    wanted = [preset.resources_dir / name for name in RESOURCES_OUTPUTS]
    paths = [path for path in wanted if (root / path).exists()]
    # Quiet: DVC would suggest `git add`ing the .gitignore files it writes, which .gitignore keeps out.
    if paths:
        _check(_dvc(["add", "--quiet", *map(str, paths)], root), "dvc add")
    pointers = [path.with_name(path.name + ".dvc") for path in paths]
    if push:
        _check(_dvc(["push", stage, *map(str, pointers)], root), "dvc push")
    return [Path("dvc.lock"), summary_path(preset_name(configfile, root)), *pointers]


def check_restorable(preset: Preset, root: str | os.PathLike = ".") -> dict[str, Any]:
    """Check that the pulled copy of ``preset`` in ``root`` is complete and came from this config (with
    the same params overlay) and these data; returns its record. Raises :class:`VersioningError` naming
    what is wrong."""
    root = Path(root)
    stage = stage_for(preset.configfile, root)
    lock = root / "dvc.lock"
    entry = ((read_yaml(lock) or {}).get("stages") or {}).get(stage) if lock.is_file() else None
    if entry is None:
        raise VersioningError(
            f"nothing to restore for {preset.configfile}: dvc.lock has no stage {stage}; run `make freeze "
            f"CONFIG={preset.configfile}` where the preset ran and commit dvc.lock"
        )
    # what dvc pull brings, but the PNGs: made again
    cached = [out["path"] for out in entry.get("outs", []) if not out["path"].startswith(f"{PLOTS_DIR}/")]
    missing = [path for path in cached if not (root / path).exists()]
    record_path = root / preset.results_dir / FREEZE_RECORD
    if missing or not record_path.is_file():
        missing = missing or [str(preset.results_dir / FREEZE_RECORD)]
        raise VersioningError(f"not pulled yet: {', '.join(missing)}; run `.venv/bin/dvc pull` first")
    record = json.loads(record_path.read_text(encoding="utf-8"))
    frozen, current = record["config"], preset.fingerprint()
    if frozen != current:
        keys = sorted(k for k in set(frozen) | set(current) if frozen.get(k) != current.get(k))
        raise VersioningError(
            f"{preset.configfile} (with {PARAMS_FILE}) differs from the config the results were frozen with "
            f"in: {', '.join(keys)}; restore with that config (the commit of the freeze), then change it"
        )
    for marker, identity in record.get("data", {}).items():
        if preset.data_identity(marker) != identity:
            raise VersioningError(
                f"the data of {preset.configfile} are not those the results were made with "
                f"({marker.removesuffix('.ready.json')}: frozen {identity}); point data.* at the same data"
            )
    return record


def _snakemake(args: Sequence[str], root: Path, what: str) -> str:
    done = subprocess.run([*_SNAKEMAKE, *args], cwd=root, text=True, capture_output=True)
    output = done.stdout + done.stderr
    if done.returncode != 0:
        print(output[-4000:], file=sys.stderr)
        raise VersioningError(f"{what} failed (exit {done.returncode}); Snakemake's output is above")
    return output


def pending_jobs(dry_run_output: str) -> dict[str, int]:
    """``{rule: count}`` from the "Job stats" table of a Snakemake dry run (empty when nothing runs)."""
    counts = {}
    for line in dry_run_output.partition("Job stats:")[2].splitlines()[3:]:
        parts = line.split()
        if len(parts) != 2 or not parts[1].isdigit() or parts[0] == "total":
            break
        counts[parts[0]] = int(parts[1])
    return counts


def restore(configfile: str | os.PathLike, root: str | os.PathLike = ".") -> list[str]:
    """Make the pulled outputs of the preset ``configfile`` in ``root`` count as finished for Snakemake
    and render its tables and report again; returns the written tables' paths.

    :func:`check_restorable`, then ``snakemake --touch --forceall`` (outputs stamped in DAG order, provenance
    recorded for the current config), a dry run that must list no job (naming them otherwise), then
    ``snakemake --forcerun tables`` allowed the table rule only, and the figures' PNGs copied again.
    """
    root = Path(root).resolve()
    preset = load_preset(configfile, root)
    check_restorable(preset, root)
    config_args = [*preset.snakemake_args, "--cores", "1"]
    _snakemake([*config_args, "--touch", "--forceall"], root, "snakemake --touch --forceall")
    if left := pending_jobs(_snakemake([*config_args, "-n"], root, "snakemake -n")):
        jobs = ", ".join(f"{rule} {n}" for rule, n in left.items())
        raise VersioningError(
            f"the pulled copy of {preset.configfile} is not a finished run: Snakemake would still run "
            f"{jobs}; run the workflow to finish it"
        )
    tables_only = [*config_args, "--forcerun", "tables", "--allowed-rules", "tables", "all"]
    _snakemake(tables_only, root, "snakemake --forcerun tables")
    results = Results(root / preset.results_dir)
    copy_figure_images(Path(results.figures), root / plots_path(preset_name(configfile, root)))
    return sorted(str(p.relative_to(root)) for p in Path(results.tables).iterdir())
