"""Heatmaps of the hyperparameter searches (contrastlab.search): dev score over each stage's grid.

One panel per searched (backbone, method) and stage. Two axes: a heatmap (the axes in alphabetical
order: the first down, the second across); one axis: a single column; more axes: the first two, each
cell the best dev score over the others (the title says so); a point whose training diverged, "diverged"
(no score). The selected point has a white box;
the published point (Nie Table 2, Li Tables 6–7, :func:`contrastlab.tables.search.published_hparams`),
where it lies on the panel's grid, a black circle. The CSV holds every point's settings on the
searched axes and its dev score.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from matplotlib.patches import Rectangle

from contrastlab import search as cl_search
from contrastlab.figures.style import figure, house_style, save
from contrastlab.tables.search import published_hparams


def _label(axis: str) -> str:
    return {"lr": "learning rate", "batch_size": "batch size"}.get(axis, axis.removeprefix("hp."))


def _tick(value: Any) -> str:
    return f"{value:g}" if isinstance(value, float) else str(value)


def selection_frame(results_dir: str | Path, experiment: str) -> pd.DataFrame:
    """Every point of the experiment's searches: backbone, method, stage, name, axis, value, dev,
    winner (one row per point and searched axis)."""
    rows = []
    for path in sorted(Path(results_dir, "search", experiment).glob("*/*/stage*.json")):
        selection = json.loads(path.read_text(encoding="utf-8"))
        for point in selection["points"]:
            cell = (selection["backbone"], selection["method"], selection["stage"], point["name"])
            winner = point["name"] == selection["winner"]
            rows += [
                (*cell, axis, cl_search.setting_value(point["settings"], axis), point["dev"], winner)
                for axis in [*point["grid"], *point["around"]]
            ]
    return pd.DataFrame(
        rows, columns=["backbone", "method", "stage", "point", "axis", "value", "dev", "winner"]
    )


def search_figure(results_dir: str | Path, experiment: str, stem: str | Path) -> list[Path]:
    """Draw the experiment's search heatmaps to ``stem``.png/.pdf/.csv; returns the paths written."""
    frame = selection_frame(results_dir, experiment)
    panels = list(frame.groupby(["backbone", "method", "stage"], sort=False)) if len(frame) else []
    with house_style():
        ncols = min(3, max(1, len(panels)))
        nrows = max(1, math.ceil(len(panels) / ncols))
        fig, axes = figure(nrows, ncols, width="column" if ncols == 1 else "page", aspect=0.9)
        for ax in axes.flat[len(panels) :]:
            ax.set_axis_off()
        if not panels:
            axes[0, 0].text(0.5, 0.5, "no search has run yet", ha="center", va="center")
        for ax, ((backbone, method, stage), group) in zip(axes.flat, panels, strict=False):
            _panel(ax, group, experiment, backbone, method, stage)
        return save(fig, stem, _by_point(frame, ["backbone", "method", "stage"]) if len(frame) else frame)


def _by_point(frame: pd.DataFrame, cells: list[str]) -> pd.DataFrame:
    """One row per point of :func:`selection_frame`'s ``frame`` (keyed by ``cells``), a column per axis."""
    index = [*cells, "point", "dev", "winner", "axis"]  # dropna=False: a diverged point has no dev
    return frame.groupby(index, dropna=False)["value"].first().unstack("axis").reset_index()


def _panel(ax, group: pd.DataFrame, experiment: str, backbone: str, method: str, stage: int) -> None:
    wide = _by_point(group, [])
    axes = list(dict.fromkeys(group["axis"]))
    rows_axis = axes[0]
    cols_axis = axes[1] if len(axes) > 1 else None
    row_values = sorted(wide[rows_axis].unique())
    col_values = sorted(wide[cols_axis].unique()) if cols_axis else [None]
    grid = np.full((len(row_values), len(col_values)), np.nan)
    trained = np.zeros(grid.shape, dtype=bool)  # a cell with a point, scored or diverged
    for record in wide.to_dict("records"):
        i = row_values.index(record[rows_axis])
        j = col_values.index(record[cols_axis]) if cols_axis else 0
        dev = record["dev"] if isinstance(record["dev"], float | int) else np.nan
        grid[i, j] = dev if np.isnan(grid[i, j]) else max(grid[i, j], dev)
        trained[i, j] = True
    image = ax.imshow(grid, cmap="viridis", aspect="auto")
    ax.grid(False)
    ax.figure.colorbar(image, ax=ax, shrink=0.8, label="dev Spearman")
    for i in range(len(row_values)):
        for j in range(len(col_values)):
            if not np.isnan(grid[i, j]):
                ax.text(j, i, f"{grid[i, j]:.1f}", ha="center", va="center", fontsize=7, color="white")
            elif trained[i, j]:  # search.record_diverged: no dev score
                ax.text(j, i, "diverged", ha="center", va="center", fontsize=7)
    ax.set_yticks(range(len(row_values)), [_tick(v) for v in row_values])
    ax.set_ylabel(_label(rows_axis))
    if cols_axis:
        ax.set_xticks(range(len(col_values)), [_tick(v) for v in col_values])
        ax.set_xlabel(_label(cols_axis))
    else:
        ax.set_xticks([])
    winner = wide[wide["winner"]]
    if len(winner):
        w = winner.iloc[0]
        j = col_values.index(w[cols_axis]) if cols_axis else 0
        i = row_values.index(w[rows_axis])
        ax.add_patch(Rectangle((j - 0.5, i - 0.5), 1, 1, fill=False, edgecolor="white", linewidth=2.5))
    published = published_hparams(experiment, backbone, method)
    on_grid = _position(published, rows_axis, row_values), _position(published, cols_axis, col_values)
    if on_grid[0] is not None and (cols_axis is None or on_grid[1] is not None):
        ax.plot(
            on_grid[1] or 0, on_grid[0], "o", markersize=14, markerfacecolor="none", markeredgecolor="black"
        )
    title = f"{backbone} · {method} · stage {stage}"
    if len(axes) > 2:
        title += f"\n(best over {', '.join(_label(a) for a in axes[2:])})"
    ax.set_title(title, fontsize=8)


def _position(published: Mapping[str, float], axis: str | None, values: list) -> int | None:
    if axis is None or axis not in published:
        return None
    for i, value in enumerate(values):
        if isinstance(value, int | float) and math.isclose(float(value), published[axis], rel_tol=1e-9):
            return i
    return None
