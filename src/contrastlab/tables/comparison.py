"""Comparison tables for the methods no paper table shows: a user's loss (or a built-in loss a paper's
tables do not list) beside the papers' losses.

For every experiment with such a method (:func:`untabled_methods`), ``compare_<experiment>`` lists every
configured method per backbone with the protocol's headline scores: our mean ± std over seeds (n), the
published number where the paper has that cell, and the seed-noise verdict against the user's loss
(:func:`contrastlab.tables.verdicts.seed_noise_verdict`). ``compare_summary`` puts the first headline
score of every protocol side by side, with each method's rank per protocol.
"""

from __future__ import annotations

import math
from collections.abc import Collection, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from contrastlab.blocks import Heading, Paragraph, Table, literals_of, to_markdown
from contrastlab.config import Grid, expanded_methods
from contrastlab.papers import PAPERS
from contrastlab.paths import write_text
from contrastlab.tables.latex import latex_table
from contrastlab.tables.published import TABLES, load_meta, load_published
from contrastlab.tables.verdicts import seed_noise_verdict

if TYPE_CHECKING:  # pandas is imported where a table is built: the workflow reads the names only
    import pandas as pd

__all__ = ["comparison_tables", "untabled_methods", "build_comparison", "build_summary", "write_comparisons"]

#: Headline scores per kind of protocol: metrics key -> column label.
#: TR.Avg twice: test accuracy (Li's and MACL's tables) and SentEval's dev accuracy (what Nie's Table 1
#: printed), so each published number sits beside the same measure.
SENTENCE_HEADLINES = {"sts_avg": "STS.Avg", "tr_avg": "TR.Avg", "tr_devacc_avg": "TR.Avg (dev acc.)"}
VISION_HEADLINES = {"linear_top1": "linear top-1", "knn_top1": "kNN top-1"}

SUMMARY = "compare_summary"


def _tabled_methods(experiment: str) -> set[str]:
    """The methods some paper table of ``experiment`` shows (its ``methods``, the cells of its rows and the
    methods its improvement is over)."""
    shown: set[str] = set()
    for name, spec in TABLES.items():
        if spec.experiment == experiment:
            layout, improvement = load_meta(name)["layout"], load_meta(name).get("improvement") or {}
            shown |= set(layout.get("methods") or [])
            shown |= {m for cells in (layout.get("cells") or {}).values() for m in cells}
            shown |= set((improvement.get("over") or {}).values())
    return shown


def untabled_methods(grid: Grid, experiment: str) -> list[str]:
    """The configured methods of ``experiment`` that no paper table shows: a user's loss, or a built-in one
    no table of that paper lists (an experiment only a paper figure reads: its user losses only, the figure
    shows the rest)."""
    if any(spec.experiment == experiment for spec in TABLES.values()):
        shown = _tabled_methods(experiment)
    elif any(experiment in figure.experiments for paper in PAPERS for figure in paper.figures.values()):
        shown = set(grid.experiments[experiment]["methods"]) - set(grid.user_losses)  # the figure shows them
    else:
        shown = set()  # a user's own experiment, or one of a paper that neither tables nor draws it
    return [m for m in grid.experiments[experiment]["methods"] if m in grid.user_losses or m not in shown]


def _user_experiments(grid: Grid) -> list[str]:
    return [name for name in grid.experiments if untabled_methods(grid, name)]


def comparison_tables(grid: Grid) -> list[str]:
    """Names of the comparison tables a config produces: one per experiment with a method that no paper
    table shows (:func:`untabled_methods`), and the summary; none where every method is in a table."""
    experiments = _user_experiments(grid)
    return [f"compare_{name}" for name in experiments] + ([SUMMARY] if experiments else [])


def _headlines(track: str, experiment: str, metrics: pd.DataFrame) -> dict[str, str]:
    if track == "sentence":
        return dict(SENTENCE_HEADLINES)
    keys = sorted(set(metrics.loc[metrics["experiment"] == experiment, "task"]))
    heads = {k: v for k, v in VISION_HEADLINES.items() if k in keys}
    ffn = sorted((k for k in keys if k.startswith("ffn") and k.endswith("_top1")), key=lambda k: int(k[3:-5]))
    heads.update({k: f"FFN {k[3:-5]}% top-1" for k in ffn})
    return heads or dict(VISION_HEADLINES)


def _published(experiment: str) -> pd.Series:
    """The numbers of ``experiment``'s paper tables by (backbone, method, key); the first table's where two
    have the cell."""
    import pandas as pd

    keys = ["backbone", "method", "key"]
    frames = [load_published(name) for name, spec in TABLES.items() if spec.experiment == experiment]
    both = pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(columns=[*keys, "value"])
    return both.drop_duplicates(keys).set_index(keys)["value"]


def _fmt(values: list[float]) -> str:
    if not values:
        return "not run"
    mean = sum(values) / len(values)
    if len(values) == 1:
        return f"{mean:.2f} (n=1)"
    std = math.sqrt(sum((v - mean) ** 2 for v in values) / (len(values) - 1))
    return f"{mean:.2f} ± {std:.2f} (n={len(values)})"


def build_comparison(
    grid: Grid, metrics: pd.DataFrame, experiment: str, failures: Collection[tuple[str, str, str]] = ()
) -> pd.DataFrame:
    """One row per (backbone, method) of ``experiment`` (sweep points included): loss, per headline
    score ours (mean ± std (n); "failed" for a cell of ``failures`` with none), published, and the verdict
    against the (first) user loss."""
    import pandas as pd

    exp = grid.experiment(experiment).spec
    users = [m for m in exp["methods"] if m in grid.user_losses]
    heads = _headlines(grid.experiment(experiment).track, experiment, metrics)
    published = _published(experiment)
    seeds = grid.experiment(experiment).seeds
    mine = metrics[(metrics["experiment"] == experiment) & metrics["seed"].isin(seeds)]
    grid = sorted(
        {(c.backbone, c.method) for c in grid.cells if c.experiment == experiment},
        key=lambda bm: (exp["backbones"].index(bm[0]), list(expanded_methods(exp)).index(bm[1])),
    )

    def scores(backbone: str, method: str, key: str) -> list[float]:
        rows = mine[(mine["backbone"] == backbone) & (mine["method"] == method) & (mine["task"] == key)]
        return rows.sort_values("seed")["score"].tolist()

    rows = []
    for backbone, method in grid:
        base, _ = expanded_methods(exp)[method]
        reference = next((u for u in users if method == u or method.startswith(f"{u}-")), None)
        point = method.removeprefix(base)  # "-bs64" for a sweep point, "" otherwise
        user_point = f"{users[0]}{point}" if users else None
        row: dict[str, Any] = {
            "backbone": backbone,
            "method": method,
            "loss": exp["methods"][base]["loss"],
            "yours": "yes" if reference else "",
        }
        for key, label in heads.items():
            own = scores(backbone, method, key)
            row[label] = "failed" if not own and (experiment, backbone, method) in failures else _fmt(own)
            pub = published.get((backbone, method, key))
            row[f"{label} published"] = f"{float(pub):.2f}" if pub is not None else "n/a"
            if reference or user_point is None:
                row[f"{label} vs yours"] = ""
            else:
                user_values = scores(backbone, user_point, key)
                row[f"{label} vs yours"] = (
                    seed_noise_verdict(user_values, own) if user_values and own else "—"
                )
        rows.append(row)
    return pd.DataFrame(rows)


def build_summary(grid: Grid, metrics: pd.DataFrame) -> pd.DataFrame:
    """Every method of every compared protocol, the first headline score per (protocol, backbone) as
    mean over seeds, and its rank there (1 = best; "not run" when it has no score)."""
    import pandas as pd

    columns: dict[str, dict[str, str]] = {}
    for experiment in _user_experiments(grid):
        table = build_comparison(grid, metrics, experiment)
        label = next(iter(_headlines(grid.experiment(experiment).track, experiment, metrics).values()))
        for backbone, group in table.groupby("backbone", sort=False):
            cells = zip(group["method"], group[label], strict=True)  # "76.04 ± 0.10 (n=3)" or "not run"
            means = {m: None if v == "not run" else float(v.split()[0]) for m, v in cells}
            ranked = sorted((v, m) for m, v in means.items() if v is not None)
            rank = {m: i + 1 for i, (_, m) in enumerate(sorted(ranked, key=lambda vm: -vm[0]))}
            column = f"{experiment} {backbone} {label}"
            columns[column] = {
                m: ("not run" if v is None else f"{v:.2f} (#{rank[m]} of {len(ranked)})")
                for m, v in means.items()
            }
    methods = list(dict.fromkeys(m for col in columns.values() for m in col))
    return pd.DataFrame([{"method": m, **{c: col.get(m, "") for c, col in columns.items()}} for m in methods])


def _table(frame: pd.DataFrame) -> Table:
    return Table([str(c) for c in frame.columns], frame.values.tolist())


def write_comparisons(
    grid: Grid,
    metrics: pd.DataFrame,
    out_dir: str | Path,
    names: Sequence[str] | None = None,
    failures: Collection[tuple[str, str, str]] = (),
) -> tuple[list[Path], list]:
    """Write each comparison table as CSV, Markdown and LaTeX; return the paths and the report's blocks."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    names = comparison_tables(grid) if names is None else list(names)
    written: list[Path] = []
    blocks: list = [Heading(2, "Your losses beside the papers' (comparison tables)")] if names else []
    for name in names:
        if name == SUMMARY:
            frame = build_summary(grid, metrics)
            title = "Summary across protocols: first headline score per protocol and backbone, with the rank"
        else:
            experiment = name.removeprefix("compare_")
            frame = build_comparison(grid, metrics, experiment, failures)
            title = (
                f"{experiment}: every method of the protocol with the same settings; ours = mean ± std over "
                "seeds (n); published = the paper's table (n/a where it has no such cell); vs yours = "
                "seed-noise verdict against your loss"
            )
        columns, body = "l" * len(frame.columns), frame.values.tolist()
        for ext, text in (
            ("csv", frame.to_csv(index=False)),
            ("md", to_markdown([_table(frame)], literals_of(grid.config))),
            ("tex", latex_table(name, columns, [list(frame.columns)], body, title)),
        ):
            path = out_dir / f"{name}.{ext}"
            write_text(path, text)  # atomically (paths.atomic_write)
            written.append(path)
        blocks += [Heading(3, name), Paragraph(title), _table(frame)]
    return written, blocks
