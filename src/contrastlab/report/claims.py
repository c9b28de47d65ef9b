"""Each paper's headline claims, stated once (``claims/<paper>.yaml``, below the paper's record) and checked
against our metrics.

Relations ``>``, ``>=`` and ``count`` are contrasts of cells (:mod:`contrastlab.report.contrasts`),
``trend`` the slope over a sweep (:mod:`contrastlab.report.trend`), ``figure_values`` a reading of a
regenerated figure's CSV (:mod:`contrastlab.report.figure_values`). A claim holds over all its parts and
backbones: **not run** if no part has run, **not reproduced** if any part is contradicted after Holm's
correction over its tested parts (:func:`~contrastlab.stats.holm_rejections`), else **undecided** if
any run part is, else **reproduced**; a ``count`` claim needs ``at_least`` of its parts. The claim
files' keys and the rule in full: ``docs/claims.md``.
"""

from __future__ import annotations

import functools
import math
import re
import shlex
from collections.abc import Mapping
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

import pandas as pd
import yaml

from contrastlab import papers
from contrastlab.config import Grid, load
from contrastlab.paths import read_yaml
from contrastlab.report.contrasts import cell_of, contrast, contrast_parts
from contrastlab.report.figure_values import (
    check_figure_values,
    figure_numbers_text,
    figure_parts,
    figure_verdict,
    part_terms,
)
from contrastlab.report.parts import (
    NOT_CONFIGURED,
    NOT_REPRODUCED,
    NOT_RUN,
    PAPER_UNSUPPORTED,
    REPRODUCED,
    UNDECIDED,
    PartResult,
    tasks_of,
)
from contrastlab.report.trend import check_trend, trend_parts
from contrastlab.stats import LEVEL, holm_rejections, seeds_needed
from contrastlab.tables.assemble import configured, evaluated
from contrastlab.tables.metrics import PRETRAINED, collect_metrics
from contrastlab.tables.verdicts import cell_stratum, noise_pools

#: The paper files: each paper's record (contrastlab.papers), then its claims.
CLAIMS_DIR = papers.PAPERS_DIR
#: The papers whose claims the report checks, in report order.
PAPERS = tuple(paper.prefix for paper in papers.PAPERS)
RELATIONS = (">", ">=", "count", "trend", "figure_values")
MAX_SEEDS = 100
OWN_CHECKS = {"trend": check_trend, "figure_values": check_figure_values}


def check_relation(claim: dict[str, Any], source: str) -> None:
    """Raise ``ValueError`` unless the claim's relation is one of :data:`RELATIONS` with the keys it
    needs (each message says which); a trend's or figure reading's parts are their modules' to check."""
    name = f"{source}: claim {claim.get('id')!r}"
    relation = claim.get("relation", ">")
    if relation not in RELATIONS:
        raise ValueError(f"{name}: relation must be one of {RELATIONS}, got {relation!r}")
    if relation in OWN_CHECKS:
        OWN_CHECKS[relation](claim, name)
        return
    total = len(claim.get("parts") or []) * len(claim.get("backbones") or []) * len(tasks_of(claim))
    if relation == "count" and not (
        isinstance(claim.get("at_least"), int) and 1 <= claim["at_least"] <= total
    ):
        raise ValueError(f"{name}: relation 'count' needs at_least, an integer from 1 to {total}")
    if relation != "count" and "at_least" in claim:
        raise ValueError(f"{name}: at_least is for relation 'count' only")
    if relation == ">=":  # comparability needs a stated tolerance, never a silent 0
        if float(claim.get("noninferiority_margin", 0)) <= 0 or "margin" in claim:
            raise ValueError(f"{name}: relation '>=' needs noninferiority_margin > 0 (and no margin)")
    elif "noninferiority_margin" in claim:
        raise ValueError(f"{name}: noninferiority_margin is for relation '>=' only")


def check_margin(claim: dict[str, Any], source: str) -> None:
    """Raise ``ValueError`` unless a claim with a margin states its ``margin_reason`` (a text), its
    ``paper_gap`` (if any) is a number and each ``text_values`` entry has a ``value`` and its ``read``."""
    name = f"{source}: claim {claim.get('id')!r}"
    if (float(claim.get("margin", 0)) or "noninferiority_margin" in claim) and not claim.get("margin_reason"):
        raise ValueError(f"{name}: a margin needs its margin_reason (why the sentence bears it), a text")
    if "paper_gap" in claim and not isinstance(claim["paper_gap"], int | float):
        raise ValueError(f"{name}: paper_gap is the paper's own worst contrast, a number")
    for term, spec in (claim.get("text_values") or {}).items():
        if not (isinstance(spec, dict) and isinstance(spec.get("value"), int | float) and spec.get("read")):
            raise ValueError(
                f"{name}: text_values {term!r} needs a value (a number) and read (how it was read)"
            )


@functools.cache
def load_claims(paper: str) -> dict[str, Any]:
    """The claim file ``claims/<paper>.yaml`` (keys ``paper``, ``file``, ``claims``; optionally
    ``not_regenerated`` and ``headline``, ``{table, method, task, backbone}``), validated."""
    path = CLAIMS_DIR / f"{paper}.yaml"
    if not path.exists():
        raise ValueError(f"no claim file for paper {paper!r}; valid: {', '.join(PAPERS)}")
    data = read_yaml(path)
    for claim in data["claims"]:
        missing = {"id", "claim", "quote", "where", "experiment", "task", "backbones", "parts"} - set(claim)
        if missing:
            raise ValueError(f"{path.name}: claim {claim.get('id')!r} lacks {sorted(missing)}")
        check_relation(claim, path.name)
        check_margin(claim, path.name)
        note = claim.get("paper_tables")
        if note is not None and not (isinstance(note, str) and note.strip()):
            raise ValueError(f"{path.name}: claim {claim['id']!r}: paper_tables must be the reason, a text")
    headline = data.get("headline")
    tables = [table["name"] for table in data.get("tables") or []]
    if headline is not None and not (
        isinstance(headline, dict)
        and set(headline) == {"table", "method", "task", "backbone"}
        and headline["table"] in tables
    ):
        raise ValueError(
            f"{path.name}: headline must be {{table, method, task, backbone}}, its table one of {tables}; "
            f"got {headline!r}"
        )
    return data


def all_claims() -> list[dict[str, Any]]:
    """Every claim of every paper, each with its ``paper`` and paper ``file``."""
    claims: list[dict[str, Any]] = []
    for paper in PAPERS:
        data = load_claims(paper)
        claims += [{"paper": paper, "file": data["file"], **claim} for claim in data["claims"]]
    return claims


@dataclass
class ClaimResult:
    """A claim with the verdict over its parts."""

    claim: dict[str, Any]
    verdict: str
    parts: list[PartResult]
    configured: bool = True  # False: not run, and no part in the config's grid (_in_grid)

    @property
    def parts_run(self) -> int:
        return sum(p.status != NOT_RUN for p in self.parts)

    @property
    def parts_tested(self) -> int:
        """Run parts with a one-sided p-value: the family of Holm's correction."""
        return sum(not math.isnan(p.p_value) for p in self.parts)

    @property
    def kind(self) -> str:
        """The verdict as the report counts it: :data:`PAPER_UNSUPPORTED` for a claim that reads "not
        reproduced" and whose sentence the paper's own tables do not support either, :data:`NOT_CONFIGURED`
        for one not run that the config's grid cannot run, else the verdict."""
        if self.verdict == NOT_REPRODUCED and self.claim.get("paper_tables"):
            return PAPER_UNSUPPORTED
        if self.verdict == NOT_RUN and not self.configured:
            return NOT_CONFIGURED
        return self.verdict

    @property
    def seeds_needed(self) -> int | None:
        needed = [p.seeds_needed for p in self.parts if p.status == UNDECIDED and p.seeds_needed]
        return max(needed) if needed else None


def _seed_values(metrics: pd.DataFrame, experiment: str, seeds: list[int] | None) -> dict:
    """(backbone, method, task) -> {seed: score} of ``experiment`` (Pretrained: seed None)."""
    frame = metrics[(metrics["experiment"] == experiment) & (metrics["method"] != PRETRAINED)]
    if seeds is not None:
        frame = frame[frame["seed"].isin(seeds)]
    frame = pd.concat([frame, metrics[metrics["experiment"] == PRETRAINED]], ignore_index=True)
    out: dict[tuple, dict] = {}
    for b, m, t, s, v in frame[["backbone", "method", "task", "seed", "score"]].itertuples(index=False):
        if not math.isnan(v):  # a diverged probe (NaN) is no score, as in the tables: never the best
            out.setdefault((b, m, t), {})[None if pd.isna(s) else int(s)] = float(v)
    return out


def evaluate_claim(
    claim: dict[str, Any], metrics: pd.DataFrame, grid: Grid, level: float = LEVEL
) -> ClaimResult:
    """Evaluate one claim on ``metrics`` (:func:`~.metrics.collect_metrics`) under ``grid``'s config (its
    experiment's seeds and sweep; ``tables.verdict_stand_ins`` maps toy backbones onto the claim's)."""
    check_relation(claim, "evaluate_claim")
    if claim.get("relation") == "figure_values":  # a reading of a figure's numbers, no seed statistics
        parts = figure_parts(claim, grid)
        verdict = figure_verdict(parts, claim.get("combine", "all"))
        return ClaimResult(claim, verdict, parts, verdict != NOT_RUN or _in_grid(grid, claim, parts))
    name, relation = claim["experiment"], claim.get("relation", ">")
    # Δ = D − shift: ">" tests D > m; ">=" tests D > −M (non-inferiority at the margin M)
    shift = -float(claim["noninferiority_margin"]) if relation == ">=" else float(claim.get("margin", 0.0))
    exp = grid.experiment(name)
    if not exp.configured:
        parts = [
            # a part's terms before evaluation: its contrast, for a trend part {sweep method: 1}
            PartResult(b, {str(p["sweep"]): 1.0} if relation == "trend" else contrast(p), NOT_RUN, task=t)
            for b in claim["backbones"]
            for t in tasks_of(claim)
            for p in claim["parts"]
        ]
        return ClaimResult(claim, NOT_RUN, parts, configured=False)
    values = _seed_values(metrics, name, exp.seeds)
    strata = functools.partial(cell_stratum, grid, name)
    if relation == "trend":
        parts, pending = trend_parts(claim, exp, values, level, strata)
    else:
        pools = noise_pools(metrics, name, exp.seeds, grid).set_index(["backbone", "key", "stratum"])
        parts, pending = contrast_parts(claim, exp, values, pools, shift, level, strata)
    _holm_and_seeds(parts, pending, level, claim.get("at_least", 0))
    for p in parts:  # whose cells the numbers are: a toy's where the config lacks the paper's backbone
        ours = exp.ours(p.backbone)
        p.stand_in = "" if ours == p.backbone else ours
    verdict = _claim_verdict(claim, parts)
    return ClaimResult(claim, verdict, parts, verdict != NOT_RUN or _in_grid(grid, claim, parts))


def _in_grid(grid: Grid, claim: dict[str, Any], parts: list[PartResult]) -> bool:
    """Whether a rerun of the config could run a part of the claim: every cell of the part (on the claim's
    backbone or its stand-in) in the config's grid, its task scored (``tables.assemble.configured``,
    ``evaluated``); a figure's part: its study in the config, the methods its rows name in the grid."""
    name = str(claim["experiment"])
    exp = grid.experiment(name)

    def cells_in(backbone: str, cells: list[tuple[str, str]]) -> bool:
        return all(configured(grid, name, exp.ours(backbone), m) and evaluated(grid, t) for m, t in cells)

    if claim.get("relation") != "figure_values":
        return any(cells_in(p.backbone, [cell_of(t, p.task) for t in p.terms]) for p in parts)
    if not exp.configured:  # a study block of its own (oar_synthetic), or none
        return exp.has_study
    named = [[(r["method"], "") for _, r in part_terms(part) if "method" in r] for part in claim["parts"]]
    return any(cells_in(b, cells) for b in claim["backbones"] for cells in named)


def _holm_and_seeds(parts: list[PartResult], pending: list[tuple], level: float, at_least: int = 0) -> None:
    """Correct the parts' "not reproduced" by Holm over the claim's tested parts ("not reproduced" is a
    union over the parts), a ``count`` claim's "reproduced" to α / (N − at_least + 1) over its N parts
    (Bonferroni's partial conjunction: when fewer than at_least hold, N − at_least + 1 may sit at the
    margin), then give each undecided part the seeds per cell that would decide it."""
    alpha, tested = (1 - level) / 2, [p for p in parts if not math.isnan(p.p_value)]
    bar = 1 - 2 * alpha / (len(parts) - at_least + 1) if at_least else level  # the level "reproduced" needs
    for part, rejected in zip(tested, holm_rejections([p.p_value for p in tested], alpha), strict=True):
        if rejected:
            part.status = NOT_REPRODUCED
        elif part.status == NOT_REPRODUCED:
            part.status, part.spared_by_holm = UNDECIDED, True
        elif at_least and part.status == REPRODUCED and 1 - part.p_value >= (1 - bar) / 2:
            part.status = UNDECIDED
    for result, delta, s_unit, factor, df_of in pending:
        if result.status == UNDECIDED and not math.isnan(s_unit):
            # "reproduced" needs the part's own level (a count's bar); "not reproduced" Holm's strictest
            at = bar if delta > 0 else 1 - 2 * alpha / len(tested)
            start = result.seeds + 1
            needed = seeds_needed(delta, s_unit, factor, df_of, start, at, MAX_SEEDS)
            result.seeds_needed = needed or MAX_SEEDS + 1


def _claim_verdict(claim: dict[str, Any], parts: list[PartResult]) -> str:
    """The claim's verdict over its parts' (the module docstring): all of them, or for relation
    ``count`` at least ``at_least``."""
    statuses = [p.status for p in parts if p.status != NOT_RUN]
    if not statuses:
        return NOT_RUN
    if claim.get("relation") == "count":  # at least `at_least` parts clear the margin; the others need not
        cleared = statuses.count(REPRODUCED)
        still_possible = len(parts) - statuses.count(NOT_REPRODUCED)  # not-run parts could still clear it
        if cleared >= claim["at_least"]:
            return REPRODUCED
        return NOT_REPRODUCED if still_possible < claim["at_least"] else UNDECIDED
    if NOT_REPRODUCED in statuses:
        return NOT_REPRODUCED
    return UNDECIDED if UNDECIDED in statuses else REPRODUCED


def evaluate_claims(metrics: pd.DataFrame, grid: Grid) -> list[ClaimResult]:
    """Every paper's claims (:func:`all_claims`) whose experiment the config has or could have."""
    return [evaluate_claim(claim, metrics, grid) for claim in all_claims()]


def numbers_text(result: ClaimResult) -> str:
    """The numbers behind a verdict: per run part, contrast ± half-width (and the seeds it would need)."""
    if result.claim.get("relation") == "figure_values":
        return figure_numbers_text(result.claim, result.parts)
    texts = []
    several = len(tasks_of(result.claim)) > 1
    for p in result.parts:
        if p.status == NOT_RUN:
            continue
        where = f"{p.stand_in}, for {p.backbone}" if p.stand_in else p.backbone
        where += f" {p.task}" if several else ""
        if not p.trend and not any(p.terms.values()):  # both sides resolved to one cell (best = largest)
            texts.append(f"{where}: {', '.join(p.terms)} is both sides (no difference)")
            continue
        width = "± ?" if math.isnan(p.half_width) else f"± {p.half_width:.2f}"
        extra = ", below its interval but not after Holm's correction" if p.spared_by_holm else ""
        if p.seeds_needed:
            needed = "> 100" if p.seeds_needed > MAX_SEEDS else p.seeds_needed
            extra += f", needs {needed} seeds" + (" per point" if p.trend else "")
        if p.trend:  # a slope over a sweep (relation "trend")
            rho = "" if math.isnan(p.rho) else f", Spearman ρ {p.rho:+.2f}"
            texts.append(f"{where}: {p.trend} = {p.diff:+.2f} {width} (ν = {p.df:g}{rho}){extra}")
            continue
        across = any("/" in m for m in p.terms)  # terms on two tasks: each names its own
        label = "".join(
            f"{(' − ' if c < 0 else ' + ') if i else ('−' if c < 0 else '')}"
            f"{'' if abs(c) == 1 else f'{_coefficient(abs(c))}·'}{m}"
            f"{f'/{p.task}' if across and '/' not in m else ''}"
            for i, (m, c) in enumerate(sorted(p.terms.items(), key=lambda kv: -kv[1]))
        )
        texts.append(f"{where}: {label} = {p.diff:+.2f} {width}{extra}")
    gap = result.claim.get("paper_gap")
    own = "" if gap is None else f" (the paper's own: {float(gap):+.2f})"
    if texts and result.claim.get("relation") == ">=":
        texts.insert(0, f"comparable if above −{float(result.claim['noninferiority_margin']):g}{own}")
    elif texts and (float(result.claim.get("margin", 0)) or gap is not None):
        texts.insert(0, f"claimed above {float(result.claim.get('margin', 0)):g}{own}")
    return "; ".join(texts) if texts else "–"


def _coefficient(c: float) -> str:
    """A coefficient as the claim file means it: 1/3 for a third (a group's mean), else ``:g``."""
    fraction = Fraction(c).limit_denominator(12)
    if abs(float(fraction) - c) < 1e-9 and fraction.denominator > 1 and abs(c) < 1:
        return f"{fraction.numerator}/{fraction.denominator}"
    return f"{c:g}"


def verdict_parts(result: ClaimResult) -> tuple[str, str, str]:
    """The verdict as (its word, the share of parts run when some have not, the reasoning after them): the
    seeds that would decide it, or a ``paper_tables`` claim's reason; such a claim reading "not reproduced"
    opens with :data:`PAPER_UNSUPPORTED`."""
    word, head, tail = result.kind, "", ""
    if result.verdict != NOT_RUN and result.parts_run < len(result.parts):
        head = f" ({result.parts_run}/{len(result.parts)} parts run)"
    if word == PAPER_UNSUPPORTED:  # the share of parts run follows the reading it qualifies
        head, tail = "", f": {result.verdict}, as on the paper's own tables{head}"
    if result.claim.get("relation") == "count" and result.verdict != NOT_RUN:
        n, k = len(result.parts), result.claim["at_least"]
        cleared = sum(p.status == REPRODUCED for p in result.parts)  # at _holm_and_seeds' level
        tail += f": {cleared} of {n} parts clear it, the claim needs {k} (each at level "
        tail += f"{1 - (1 - LEVEL) / (n - k + 1):.4g}, Bonferroni over the {n - k + 1} that may fail)"
    elif result.verdict == NOT_REPRODUCED and result.parts_tested > 1:
        contradicted = sum(p.status == NOT_REPRODUCED for p in result.parts)
        tail += f": {contradicted} of {result.parts_tested} parts contradicted (Holm-corrected)"
    if result.verdict == UNDECIDED and result.claim.get("relation") == "figure_values":
        # a figure's numbers within their own noise (a simulation's batches, a study's seeds: its config)
        tail += ": within the noise of the figure's numbers (more batches or seeds would decide it)"
    elif result.verdict == UNDECIDED:
        needed = result.seeds_needed
        tail += (
            ": needs ≥ 2 seeds per cell to measure the noise"
            if needed is None
            else f": {'> 100' if needed > MAX_SEEDS else f'~{needed}'} seeds per cell would decide it"
        )
    if result.claim.get("paper_tables"):
        tail += f" (the paper's tables do not support its sentence: {result.claim['paper_tables']})"
    return word, head, tail


def verdict_text(result: ClaimResult) -> str:
    """The verdict's one text (:func:`verdict_parts` in a row)."""
    return "".join(verdict_parts(result))


def undecided_cells(results: list[ClaimResult], grid: Grid) -> dict[tuple[str, str], set[str]]:
    """(experiment, backbone) -> the methods (sweep points included) of the undecided claims' run parts:
    the cells that more seeds would decide (:func:`add_seeds_commands`)."""
    out: dict[tuple[str, str], set[str]] = {}
    for result in results:
        # a figure's claim has no cells to add seeds to (its simulation's or study's size is its config's)
        if result.verdict != UNDECIDED or result.claim.get("relation") == "figure_values":
            continue
        name = result.claim["experiment"]
        exp = grid.experiment(name)
        for p in result.parts:
            if p.status == UNDECIDED:
                cells = {cell_of(m, p.task)[0] for m in p.terms}
                out.setdefault((name, exp.ours(p.backbone)), set()).update(cells - {PRETRAINED})
    return out


#: Seeds per cell the add-seeds command aims at when a claim's noise cannot be measured yet (one seed).
MIN_SEEDS = 3
#: The most seeds per cell the add-seeds command brings a cell to (``make add-seeds``' default).
ADD_SEEDS_MAX = 10


def seed_plan(results: list[ClaimResult], grid: Grid, max_seeds: int = ADD_SEEDS_MAX) -> list[dict[str, Any]]:
    """What the add-seeds command runs: the methods of each (experiment, backbone) of :func:`undecided_cells`
    brought to the seeds their claims need (:data:`MIN_SEEDS` to ``max_seeds``), as :func:`seed_steps`."""
    need: dict[tuple[str, str], int] = {}
    cells: dict[tuple[str, str], set[str]] = {}
    for result in results:
        target = min(max(result.seeds_needed or MIN_SEEDS, MIN_SEEDS), max_seeds)
        for key, methods in undecided_cells([result], grid).items():
            need[key] = max(need.get(key, 0), target)
            cells.setdefault(key, set()).update(methods)
    return seed_steps(grid, {(*key, need[key]): sorted(methods) for key, methods in sorted(cells.items())})


def seed_steps(grid: Grid, wanted: Mapping[tuple[str, str, int], list[str]]) -> list[dict[str, Any]]:
    """The steps of an add-seeds plan, one per (experiment, backbone, n) -> methods of ``wanted``: the
    methods on the backbone brought to n seeds, the new ones continuing after the experiment's last seed;
    none where they have that many already."""
    plan = []
    for (experiment, backbone, n), methods in wanted.items():
        seeds = list(grid.experiment(experiment).seeds or [])
        new = list(range(max(seeds) + 1, max(seeds) + 1 + n - len(seeds)))
        if new:
            plan.append(
                dict(experiment=experiment, backbone=backbone, methods=methods, seeds=seeds + new, new=new)
            )
    return plan


#: A string YAML may read unquoted in a flow collection, if it also reads back as that string (not
#: ``001``, ``yes``, ``null``, ``.inf``): no flow indicator, no ``: ``, no leading indicator.
_PLAIN = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.+/-]*")


def _yaml_string(text: str) -> str:
    """``text`` as a YAML scalar that reads back as this string: plain where :data:`_PLAIN` allows and
    YAML agrees, else double-quoted (``"`` and ``\\`` escaped, every character that is not printable as
    ``\\u``/``\\U``)."""
    try:
        plain = _PLAIN.fullmatch(text) and yaml.safe_load(text) == text
    except yaml.YAMLError:
        plain = False
    if plain:
        return text
    out = []
    for ch in text:
        if ch in '"\\':
            out.append("\\" + ch)
        elif ch.isprintable() and ch not in "\x85\u2028\u2029":
            out.append(ch)
        else:
            out.append(f"\\u{ord(ch):04x}" if ord(ch) <= 0xFFFF else f"\\U{ord(ch):08x}")
    return '"' + "".join(out) + '"'


def flow_value(value: Any) -> str:
    """``value`` (mappings, lists, strings, integers, finite floats, booleans, None) as one line of YAML
    flow that ``yaml.safe_load`` reads back as exactly ``value``, type included: a ``--config`` value.
    Mapping keys sorted.

    >>> flow_value({"backbones": ["tiny-bert", "001", "x, y;z"], "seeds": [43, 44], "on": True})
    '{backbones: [tiny-bert, "001", "x, y;z"], "on": true, seeds: [43, 44]}'
    """
    if isinstance(value, Mapping):
        return (
            "{" + ", ".join(f"{flow_value(k)}: {flow_value(value[k])}" for k in sorted(value, key=str)) + "}"
        )
    if isinstance(value, list | tuple):
        return "[" + ", ".join(flow_value(item) for item in value) + "]"
    if isinstance(value, bool) or value is None:
        return {True: "true", False: "false", None: "null"}[value]
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float) and math.isfinite(value):
        text = repr(value)  # YAML 1.1 reads 1e-05 as a string: the mantissa needs its point
        return text if "." in text or "e" not in text else text.replace("e", ".0e", 1)
    if isinstance(value, str):
        return _yaml_string(value)
    raise TypeError(f"no --config value for {value!r}")


def config_word(key: str, value: Any) -> str:
    """``key=value`` as one ``--config`` word (unquoted: :func:`shlex.join` quotes the command once)."""
    return f"{key}={flow_value(value)}"


def add_seeds_commands(plan: list[dict[str, Any]], configfile: str = "config.yaml") -> list[str]:
    """Snakemake commands (:func:`add_seeds_parts`, ``configfile`` as shell words) that train and evaluate
    only the cells of ``plan`` (:func:`seed_plan`) with their new seeds, one per experiment and backbone,
    then render the tables and report with ``tables={partial: true}``; the workflow's default profile."""
    if not plan:
        return []
    base, experiments, tails = add_seeds_parts(plan, configfile)
    return [f"{base} --config {experiments} {tail}" for tail in tails]


def add_seeds_parts(
    plan: list[dict[str, Any]], configfile: str = "config.yaml"
) -> tuple[str, str, list[str]]:
    """:func:`add_seeds_commands` in its shell-quoted parts: the command line they open with, the
    ``--config`` word they share (each experiment's seeds: the union of its steps', so every new seed is
    configured) and what follows it in each (its cells' ``select``; the last one's tables)."""
    seeds: dict[str, set[int]] = {}
    for step in plan:
        seeds.setdefault(step["experiment"], set()).update(step["seeds"])
    shared = config_word("experiments", {e: {"seeds": sorted(s)} for e, s in seeds.items()})
    tails = []
    for step in plan:
        select = {
            "experiments": [step["experiment"]],
            "backbones": [step["backbone"]],
            "methods": list(step["methods"]),
            "seeds": list(step["new"]),
        }
        tails.append([config_word("select", select)])
    tails.append([config_word("tables", {"partial": True}), "--forcerun", "tables"])
    return (
        f".venv/bin/snakemake --configfile {configfile}",
        shlex.quote(shared),
        [shlex.join(t) for t in tails],
    )


def plan_for_configfile(
    configfile: str, max_seeds: int = 10
) -> tuple[list[ClaimResult], list[dict[str, Any]]]:
    """The claims evaluated on the metrics under the preset's ``results_dir`` and the add-seeds plan."""
    grid = Grid(load(configfile))
    results = evaluate_claims(collect_metrics(grid.results.metrics()), grid)
    return results, seed_plan(results, grid, max_seeds=max_seeds)
