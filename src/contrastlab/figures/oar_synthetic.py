"""OAR Table 2 (a figure in the paper, §3): the synthetic clusters and each loss's embeddings, ± OAR.

One 3-D scatter panel per run of :func:`run_synthetic_study`, coloured by cluster: the first column the
input (top) and its projection onto the unit sphere (bottom: three lines through the origin become two
antipodal caps each); then one column per loss, without OAR on top and with it below, each titled with
the effective rank (95% of Σσ²) and the smallest angle between cluster axes. The CSV holds every point.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from contrastlab.figures.style import PALETTE, figure, house_style, save
from contrastlab.training.synthetic import SyntheticRun, SyntheticSettings, study_table, train_synthetic

__all__ = ["LOSS_LABELS", "plot_synthetic"]

#: The paper's names of the registry losses in the study (Table 2's row names).
LOSS_LABELS = {"ntxent": "InfoNCE", "dcl_vision": "DCL", "vicreg": "VICReg", "barlow_twins": "BarlowTwins"}

# A fixed camera, the same in every panel, so the panels compare at a glance.
_VIEW = {"elev": 22.0, "azim": 35.0}


def _panel(ax, points: np.ndarray, labels: np.ndarray, title: str) -> None:
    colours = [PALETTE[int(k) % len(PALETTE)] for k in labels]
    if np.isfinite(points).all():
        ax.scatter(*points.T, c=colours, s=1.5, depthshade=False, linewidths=0)
    else:
        ax.text(0.0, 0.0, 0.0, "diverged", ha="center", va="center")
    ax.set(xlim=(-1, 1), ylim=(-1, 1), zlim=(-1, 1))
    ax.set_box_aspect((1, 1, 1))
    ax.view_init(**_VIEW)
    ax.set_title(title, fontsize=7, pad=0)
    ax.tick_params(labelsize=4, pad=-4)
    ticks = [-1, 0, 1]
    ax.set(xticks=ticks, yticks=ticks, zticks=ticks, xticklabels=[], yticklabels=[], zticklabels=[])


def _rows(panel: str, loss: str, oar: bool | None, labels: np.ndarray, points: np.ndarray) -> pd.DataFrame:
    columns = {"panel": panel, "loss": loss, "oar": oar, "cluster": labels.astype(int)}
    return pd.DataFrame({**columns, **dict(zip("xyz", points.T, strict=True))})


def plot_synthetic(result_by_run: Mapping[tuple[str, bool], Any], stem: str | Path) -> list[Path]:
    """Draw the study: ``result_by_run`` maps (loss, oar) to a
    :class:`~contrastlab.training.synthetic.SyntheticRun` (``x``, ``labels``, ``z``,
    ``effective_rank``, ``min_axis_angle_deg``); writes ``stem``.png/.pdf and ``stem``.csv (panel,
    loss, oar, cluster, x, y, z of every plotted point) and returns the paths."""
    if not result_by_run:
        raise ValueError("no runs to plot")
    losses = list(dict.fromkeys(loss for loss, _ in result_by_run))
    first = next(iter(result_by_run.values()))
    x, labels = np.asarray(first.x, dtype=float), np.asarray(first.labels)
    on_sphere = x / np.linalg.norm(x, axis=1, keepdims=True)
    frames = [_rows("input", "", None, labels, x), _rows("input on the sphere", "", None, labels, on_sphere)]
    with house_style():
        fig, axes = figure(2, len(losses) + 1, width="page", aspect=1.15, subplot_kw={"projection": "3d"})
        _panel(axes[0, 0], x, labels, "input: 3 noisy lines")
        _panel(axes[1, 0], on_sphere, labels, "input on the sphere")
        for col, loss in enumerate(losses, start=1):
            for row, oar in enumerate((False, True)):
                ax = axes[row, col]
                run = result_by_run.get((loss, oar))
                if run is None:
                    ax.set_axis_off()
                    continue
                name = ("OAR-" if oar else "") + LOSS_LABELS.get(loss, loss)
                detail = (
                    "diverged"
                    if getattr(run, "diverged", False)
                    else f"rank {run.effective_rank}, axes ≥ {run.min_axis_angle_deg:.0f}°"
                )
                z = np.asarray(run.z, dtype=float)
                _panel(ax, z, np.asarray(run.labels), f"{name}\n{detail}")
                frames.append(_rows(name, loss, oar, np.asarray(run.labels), z))
        return save(fig, stem, pd.concat(frames, ignore_index=True))


def run_synthetic_study(
    settings: SyntheticSettings | Mapping[str, Any],
    out_dir: str | Path,
    *,
    figure_stem: str | Path | None = None,
    table_path: str | Path | None = None,
    sweep_path: str | Path | None = None,
) -> pd.DataFrame:
    """Every loss of ``settings.losses`` without and with OAR, once per seed (``settings.seed`` on,
    ``settings.seeds`` of them: 80 trainings with the defaults): writes the table (:func:`study_table`,
    one row per run) to ``table_path`` (default ``out_dir/table2.csv``), the figure of the first seed's
    runs (:func:`plot_synthetic`) to ``figure_stem`` (default ``out_dir/table2_figure``: .png, .pdf and
    the plotted points as .csv, a name apart from the table's), and the sweep of the settings the paper
    leaves unstated (``settings.sweep``: ``settings.sweep_loss`` without OAR, once per seed under each
    override, a ``setting`` column naming it; "as configured" for the study's own) to ``sweep_path``
    (default ``out_dir/table2_sweep.csv``). Returns the table."""
    if not isinstance(settings, SyntheticSettings):
        settings = SyntheticSettings.from_dict(settings)
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    runs: dict[tuple[str, bool, int], SyntheticRun] = {}
    for seed in range(settings.seed, settings.seed + settings.seeds):
        seeded = dataclasses.replace(settings, seed=seed)
        for loss in settings.losses:
            for oar in (False, True):
                started = time.perf_counter()
                run = train_synthetic(seeded, loss, oar)
                runs[(loss, oar, seed)] = run
                print(
                    f"seed {seed} {loss}{' + OAR' if oar else ''}: effective rank {run.effective_rank}, "
                    f"line energy {run.line_energy:.3f}, cluster axes "
                    f"{np.round(run.axis_angles_deg, 1).tolist()} deg, final loss {run.final_loss:.4f}, "
                    f"clipped {run.clipped_share:.0%}{' (diverged)' if run.diverged else ''} "
                    f"[{time.perf_counter() - started:.1f} s]",
                    flush=True,
                )
    table = study_table(runs.values())
    path = Path(table_path) if table_path is not None else out_dir / "table2.csv"
    path.parent.mkdir(parents=True, exist_ok=True)
    table.to_csv(path, index=False)
    sweep = sweep_table(settings, {key: run for key, run in runs.items() if key[0] == settings.sweep_loss})
    sweep.to_csv(Path(sweep_path) if sweep_path is not None else out_dir / "table2_sweep.csv", index=False)
    first = {(loss, oar): run for (loss, oar, seed), run in runs.items() if seed == settings.seed}
    plot_synthetic(first, figure_stem if figure_stem is not None else out_dir / "table2_figure")
    return table


#: The ``setting`` of the study's own runs in the sweep's table.
AS_CONFIGURED = "as configured"


def setting_name(override: Mapping[str, Any]) -> str:
    """A sweep override as its table names it, e.g. "optimizer=adam, lr=0.001"."""
    return ", ".join(
        f"{key}={value:g}" if isinstance(value, float) else f"{key}={value}"
        for key, value in override.items()
    )


def sweep_table(
    settings: SyntheticSettings, own: Mapping[tuple[str, bool, int], SyntheticRun]
) -> pd.DataFrame:
    """The sweep of :attr:`SyntheticSettings.sweep`: ``settings.sweep_loss`` without OAR under each
    override, once per seed of the study, after its own runs (``own``: (loss, oar, seed) -> run, the
    study's runs of that loss, reused as the "as configured" rows); :func:`study_table`'s columns after
    a ``setting`` column."""
    loss, seeds = settings.sweep_loss, range(settings.seed, settings.seed + settings.seeds)
    frames = [study_table(run for (_, oar, _), run in own.items() if not oar).assign(setting=AS_CONFIGURED)]
    for override in settings.sweep:
        started = time.perf_counter()
        runs = [train_synthetic(settings.reading(override, seed), loss, False) for seed in seeds]
        frames.append(study_table(runs).assign(setting=setting_name(override)))
        ranks = [run.effective_rank for run in runs]
        print(
            f"sweep {setting_name(override)}: {loss} ranks {ranks} [{time.perf_counter() - started:.1f} s]",
            flush=True,
        )
    table = pd.concat(frames, ignore_index=True)
    return table[["setting", *[c for c in table.columns if c != "setting"]]]
