"""The Snakemake DAG of the full reproduction: dry-run job counts, lint, SLURM resources, no network."""

from __future__ import annotations

import collections
import re
from types import SimpleNamespace

import pytest
import yaml

from contrastlab import config as cl_config

from .conftest import (
    demo_process,
    dry_run_jobs,
    folders,
    job_counts,
    one_line_failure,
    run_snakemake,
    snakemake_process,
    succeeded,
)

SCHEDULE_FIRST = 8  # a long module: tests/conftest.py starts the highest numbers first


@pytest.fixture(scope="module")
def full_dry_run(repo_root, tmp_path_factory):
    """One dry run of config.yaml's targets ``all`` and ``searches`` in a scratch folder: its output,
    its jobs (:func:`dry_run_jobs`; per target, :func:`jobs_upstream`) and the folder."""
    scratch = tmp_path_factory.mktemp("dry")
    output = run_snakemake(
        repo_root, "-n", "--cores", "all", "--config", *folders(scratch), "--", "all", "searches"
    )
    return SimpleNamespace(output=output, jobs=dry_run_jobs(output), scratch=scratch)


def jobs_upstream(jobs: list[dict], target: str) -> dict[str, int]:
    """Jobs per rule of ``snakemake <target>`` (a file, or a rule of one job such as ``all``): the job of
    ``target`` and, transitively, the jobs making its inputs."""
    producer = {path: index for index, job in enumerate(jobs) for path in job["output"]}
    start = [index for index, job in enumerate(jobs) if job["rule"] == target] or (
        [producer[target]] if target in producer else []
    )
    assert len(start) == 1, f"{len(start)} jobs of the dry-run are {target}"
    todo, seen = start, set()
    while todo:
        index = todo.pop()
        if index not in seen:
            seen.add(index)
            todo.extend(producer[path] for path in jobs[index]["input"] if path in producer)
    return dict(collections.Counter(jobs[index]["rule"] for index in seen))


def test_a_search_point_equal_to_a_cell_is_not_trained_twice(repo_root, tmp_path):
    """The demo's searches: of the 2x2 MPT grid and the 2 + 2 mMHE stages, the points equal to the
    configured mpt and mmhe cells train as those cells (one job each), the others as their own."""
    output = succeeded(demo_process(repo_root, tmp_path, "--", "searches", args=("-n", "--cores", "2")))
    trained = sorted(
        set(re.findall(r"wildcards: experiment=(\w+), backbone=tiny-bert, method=(\S+), seed=42", output))
    )
    assert trained == [
        ("li2024", "mmhe"),
        ("li2024", "mmhe~s1-lr0.0001"),
        ("li2024", "mmhe~s2-r1.25"),
        ("li2024", "mmhe~s2-r2"),
        ("nie2023", "mpt"),
        ("nie2023", "mpt~s1-lr0.0001-m0.23"),
        ("nie2023", "mpt~s1-lr0.0001-m0.3"),
        ("nie2023", "mpt~s1-lr3e-05-m0.3"),
    ], trained
    assert "mpt~s1-lr3e-05-m0.23" not in output and "mmhe~s1-lr3e-05" not in output
    counts = job_counts(output)
    assert counts["train"] == 8 and counts["search_select"] == 3
    assert counts["search_encode"] == counts["search_evaluate"] == 2


def test_full_reproduction_lists_every_job(repo_root, full_dry_run):
    """config.yaml's default target: every cell's training and evaluation, every figure and table, each
    data set and backbone fetched once; ``searches``: every point of Nie A.3 and Li A.4 as a train job, a
    selection per stage, a test evaluation per search."""
    # every job of the shared dry-run was read (its job stats count the same), the searches' included
    assert len(full_dry_run.jobs) == job_counts(full_dry_run.output)["total"]
    counts = jobs_upstream(full_dry_run.jobs, "searches")
    # 1,736 points: Nie 448 + 760, Li 128 + 400; 28 of Nie's stage-1 points are the paper cells.
    assert counts["train"] == 1736
    # Nie: 7 losses x 4 backbones x 2 stages; Li: 4 losses x 2 backbones x 2 stages.
    assert counts["search_select"] == 56 + 16
    assert counts["search_encode"] == counts["search_evaluate"] == 28 + 8
    assert "evaluate" not in counts and "tables" not in counts
    counts = jobs_upstream(full_dry_run.jobs, "all")
    assert not {"search_select", "search_encode", "search_evaluate"} & set(counts), counts
    config = cl_config.load(repo_root / "config.yaml")
    grid = cl_config.Grid(config)
    cells = list(grid.cells)
    n_vision = sum(grid.experiment(c.experiment).track == "vision" for c in cells)
    n_sentence = len(cells) - n_vision
    print("jobs per rule (config.yaml):", counts)
    # The papers' tables (189 cells) and the figure sweeps: Nie Fig. 3 (8 margins), Li Fig. 6 (8 + 7 + 8),
    # and Li §3.2's conjecture runs (baseline with and without GD).
    assert counts["train"] == n_sentence == 189 + 8 + 23 + 2
    # each sentence cell's evaluation is two jobs: the encoding (GPU) and the probes (CPU)
    assert counts["encode"] == counts["evaluate"] == n_sentence
    # and no model card: make publish and make cards write those from the finished files
    assert not {"model_card", "model_card_vision"} & set(counts), counts
    # MACL Table 9 / B.3: 5 losses x 5 batch sizes x 3 seeds = 75; OAR Table 3 and Fig. 2: 8 methods
    # (4 losses +- OAR) x 8 learning rates x 1 seed = 64; OAR Table 4: 8 methods on CIFAR-100 = 8.
    # each image cell's evaluation is two jobs too: the features (GPU) and the probes (CPU)
    vision_jobs = [counts[f"{step}_vision"] for step in ("train", "encode", "evaluate")]
    assert vision_jobs == [n_vision] * 3 and n_vision == 75 + 64 + 8
    oar = [c for c in cells if c.experiment.startswith("oar_")]
    assert len(oar) == 72 and {c.method for c in oar if c.experiment == "oar_cifar100"} == {
        f"{prefix}{loss}" for prefix in ("", "oar_") for loss in ("infonce", "dcl", "bt", "vicreg")
    }
    assert counts["image_data"] == 2  # CIFAR-10 and CIFAR-100, each fetched once
    # OAR Table 2 (synthetic), Fig. 2/4 (the sweep) and Fig. 3 (spectra), each one job.
    assert counts["oar_synthetic"] == counts["figure_lr_sweep"] == counts["figure_spectra"] == 1
    # Nie Fig. 1 from the metrics and the training logs.
    assert counts["figure_align_uniform"] == counts["figure_training_curves"] == 1
    # Nie Fig. 2a/2b/4 and Li Fig. 2/3/10, computed without training: one job per paper.
    assert counts["figure_analytic_nie2023"] == counts["figure_analytic_li2024"] == 1
    assert counts["figure_li2024_fig6"] == counts["figure_nie2023_fig3"] == 1
    # Every figure of the papers' records read from cells (Nie Fig. 1, 3a-e; Li Fig. 5-9): one job each.
    from contrastlab.figures.catalog import CELL_FIGURES

    assert all(counts[f"figure_{name.rsplit('/', 1)[-1]}"] == 1 for name in CELL_FIGURES), counts
    assert counts["encode_pretrained"] == counts["evaluate_pretrained"] == 4
    assert counts["fetch_backbone"] == 4
    assert counts["senteval_data"] == 1 and counts["corpus"] == 1
    assert counts["tables"] == 1


@pytest.mark.parametrize("preset", ["config/gpu-check.yaml", "config/cpu.yaml"])
def test_every_other_preset_dry_runs(repo_root, tmp_path, preset):
    """The presets no other test dry-runs build their DAG (gpu-check.yaml has no paper table)."""
    output = run_snakemake(repo_root, "-n", "--configfile", preset, "--config", *folders(tmp_path))
    counts = job_counts(output)
    assert counts["tables"] == 1 and counts["train"] >= 1, counts


def test_the_demo_dry_run_prints_no_shell_command(repo_root, tmp_path):
    """``snakemake -n`` of the demo under profiles/default, as ``make demo`` runs it, lists its 115 jobs
    without a "Shell command: None" line each (every rule is a script: rule; printshellcmds is off)."""
    output = succeeded(demo_process(repo_root, tmp_path, args=("-n",)))
    assert job_counts(output)["total"] == 115
    assert "Shell command" not in output, output[-2000:]


def test_lint_is_clean(repo_root):
    output = run_snakemake(repo_root, "--lint")
    assert "Congratulations, your workflow is in a good condition!" in output, output[-3000:]


#: What the SLURM profiles' dry runs of config.yaml select (one run per profile).
SLURM_SELECT = "select={experiments: [nie2023, macl_cifar10, oar_cifar10, oar_cifar100]}"
#: The rules of the SentEval probe jobs, which the SLURM profiles send out in groups.
PROBE_RULES = ("evaluate", "evaluate_pretrained", "search_evaluate")
#: The rules whose jobs hold a GPU (every other job asks for none).
GPU_RULES = {"train", "encode", "encode_pretrained", "train_vision", "encode_vision", "figure_spectra"}


@pytest.fixture(scope="module")
def slurm_dry_run(repo_root, tmp_path_factory):
    """``slurm_dry_run(profile)``: the dry run of :data:`SLURM_SELECT` through ``profiles/<profile>``
    (its output and each job's rule, resources line and wildcards), once per profile."""
    runs = {}

    def dry_run(profile: str) -> SimpleNamespace:
        if profile not in runs:
            scratch = tmp_path_factory.mktemp(f"dry-{profile}")
            overrides = ("--config", *folders(scratch), SLURM_SELECT)
            output = run_snakemake(repo_root, "-n", "--workflow-profile", f"profiles/{profile}", *overrides)
            jobs = [(job["rule"], job["resources"], job["wildcards"]) for job in dry_run_jobs(output)]
            runs[profile] = SimpleNamespace(output=output, jobs=jobs)
        return runs[profile]

    return dry_run


def test_slurm_profile_requests_gpus_only_for_gpu_rules(slurm_dry_run):
    """Every GPU job asks one GPU, every other none; OAR Tables 3-4 and the Fig. 2 sweep: every job of
    theirs is planned."""
    run = slurm_dry_run("slurm")
    jobs = run.jobs
    rules = {rule for rule, _, _ in jobs}
    expected = {"train", "encode", "evaluate", "train_vision", "encode_vision", "evaluate_vision", "tables"}
    assert expected | {"encode_pretrained", "evaluate_pretrained", "image_data"} <= rules, rules
    ntxent = [w for rule, _, w in jobs if rule == "train_vision" and w["method"].startswith("ntxent")]
    assert len(ntxent) == 15  # MACL's ntxent at 5 batch sizes x 3 seeds
    for rule, resources, _ in jobs:
        if rule in GPU_RULES:
            assert re.search(r"\bgpu=1\b", resources), (rule, resources)
            assert re.search(r"\bruntime=\d+", resources), (rule, resources)
        else:
            assert "gpu=" not in resources.replace("gpu=0", ""), (rule, resources)
        if rule in {"train", "encode", "evaluate", "train_vision", "evaluate_vision"}:
            # config.yaml sets no *_runtime_min: each job asks for its projected time x 2 (make plan)
            assert int(re.search(r"\bruntime=(\d+)", resources).group(1)) >= 30, resources
        if rule in {"evaluate", "evaluate_pretrained", "evaluate_vision"}:
            # the probes run on the CPU: no GPU held while they fit (rules/evaluate.smk, rules/vision.smk)
            assert re.search(r"\bgpu=0\b", resources) and re.search(r"\bruntime=\d+", resources), resources
    oar = collections.Counter(rule for rule, _, w in run.jobs if w.get("experiment", "").startswith("oar_"))
    assert oar["train_vision"] == oar["encode_vision"] == oar["evaluate_vision"] == 64 + 8, oar
    counts = collections.Counter(rule for rule, _, _ in run.jobs)
    assert counts["image_data"] == 2 and counts["oar_synthetic"] == 1 and counts["figure_spectra"] == 1
    assert counts["figure_lr_sweep"] == 1 and counts["tables"] == 1
    assert "oar_infonce-lr1e-07" in run.output and "oar_vicreg-lr1.0" in run.output  # the Fig. 2 sweep's ends


def test_slurm_profiles_take_cpus_memory_and_account_from_the_rules_not_from_bogus_defaults(repo_root):
    """Nothing in the profiles overrides the rules' threads, and no placeholder account or partition; the
    SentEval probe jobs go out 20 to a group job, 4 at a time inside it (a local ``probe_slots`` pool)."""
    for name in ("slurm", "slurm-gres"):
        profile = yaml.safe_load((repo_root / "profiles" / name / "config.yaml").read_text())
        defaults = profile.get("default-resources") or {}
        assert not {"cpus_per_task", "slurm_account", "slurm_partition", "threads"} & set(defaults), name
        assert profile["executor"] == "slurm" and profile["retries"] == 1, name
        # group-components and resources as Snakemake reads them: tests/test_profiles.py
        scopes = profile["set-resource-scopes"]
        assert scopes == {"probe_slots": "local", "pack_slots": "local"}, name  # per group, not global
        assert profile["groups"] == dict.fromkeys(PROBE_RULES, "senteval_probes"), name


def _group_jobs(output: str, group: str) -> list[collections.Counter]:
    """The rules of each group job ``group`` a dry run printed (indented under ``Group job <group>``)."""
    groups: list[collections.Counter] = []
    inside = False
    for line in output.splitlines():
        if f"Group job {group} " in line:
            groups.append(collections.Counter())
            inside = True
        elif inside and (match := re.match(r"\s+rule (\w+):", line)):
            groups[-1][match.group(1)] += 1
        elif inside and line and not line[0].isspace():
            inside = False
    return groups


def test_slurm_profiles_send_the_senteval_probe_jobs_out_twenty_to_a_group(
    repo_root, tmp_path, slurm_dry_run
):
    """The SentEval probe jobs go to SLURM 20 to a group job (`senteval_probes`), each holding one
    `probe_slots`; GPU jobs and image probes go out one by one; a local run has no groups."""
    for rule_file in ("evaluate.smk", "search.smk"):  # each probe job holds one slot of its group job
        text = (repo_root / "rules" / rule_file).read_text()
        # one block per rule, a `use rule <parent> as <rule> with:` one included
        for block in re.split(r"^(?=(?:use )?rule )", text, flags=re.M)[1:]:
            rule = re.match(r"(?:use rule \w+ as |rule )(\w+)", block)[1]
            assert bool(re.search(r"^\s+probe_slots=1,", block, re.M)) == (rule in PROBE_RULES), rule
    run = slurm_dry_run("slurm")
    groups = _group_jobs(run.output, "senteval_probes")
    # Nie's cells and its 4 Pretrained rows: 20 to a group, the rest in the last one
    cells = cl_config.Grid(cl_config.load(repo_root / "config.yaml")).cells
    probes = sum(c.experiment == "nie2023" for c in cells) + 4
    assert sorted(sum(g.values()) for g in groups) == sorted([20] * (probes // 20) + [probes % 20]), groups
    assert sum(groups, collections.Counter()) == {"evaluate": probes - 4, "evaluate_pretrained": 4}, groups
    alone = collections.Counter(rule for rule, _, _ in run.jobs)
    n_vision = 75 + 64 + 8  # MACL Table 9, OAR Tables 3 and 4
    assert alone["evaluate"] == alone["encode"] == probes - 4 and alone["evaluate_vision"] == n_vision, alone
    overrides = ("--config", *folders(tmp_path), "select={experiments: [nie2023], methods: [cl]}")
    local = run_snakemake(repo_root, "-n", "--workflow-profile", "profiles/default", *overrides)
    assert "Group job" not in local and job_counts(local)["evaluate"] == 12


def test_slurm_gres_profile_asks_gpus_as_gres(slurm_dry_run):
    """profiles/slurm-gres: every GPU job asks gres=gpu:1 and no gpu=N; jobs, runtimes and memory as in
    profiles/slurm."""
    jobs = slurm_dry_run("slurm-gres").jobs
    assert GPU_RULES | {"evaluate", "evaluate_pretrained", "evaluate_vision"} <= {rule for rule, _, _ in jobs}
    for rule, resources, _ in jobs:
        assert not re.search(r"\bgpu=[1-9]", resources), (rule, resources)
        if rule in GPU_RULES:
            assert re.search(r"\bgres=gpu:1\b", resources), (rule, resources)
            assert re.search(r"\bruntime=\d+", resources) and re.search(r"\bmem_mb=\d+", resources), resources
        else:
            assert "gres=" not in resources, (rule, resources)

    def asked(jobs, *keys):
        found = (re.findall(rf"\b({'|'.join(keys)})=(\w+)", resources) for _, resources, _ in jobs)
        return sorted(
            (rule, sorted(wildcards.items()), sorted(pairs))
            for (rule, _, wildcards), pairs in zip(jobs, found, strict=True)
        )

    assert asked(jobs, "runtime", "mem_mb") == asked(slurm_dry_run("slurm").jobs, "runtime", "mem_mb")


def test_asking_for_one_figure_runs_exactly_its_trainings(repo_root, full_dry_run):
    """`snakemake <figure file>` trains, encodes and evaluates exactly the figure's cells (read off the
    full reproduction's dry run); `snakemake -n <figure file>` lists exactly the jobs upstream of that file
    in the full dry run (what :func:`jobs_upstream` relies on)."""
    jobs, scratch = full_dry_run.jobs, full_dry_run.scratch
    for figure, trained, evaluated in (
        ("li2024/li2024_fig6", 23, 0),
        ("nie2023/nie2023_fig3", 8, 8),  # Fig. 3a: the metrics and the logs' distance gaps
        ("li2024/li2024_fig9", 2, 0),  # a geometry figure: its experiment's training logs only
    ):
        counts = jobs_upstream(jobs, f"{scratch}/results/figures/{figure}.png")
        assert counts.get("train", 0) == trained and counts.get("evaluate", 0) == evaluated, (figure, counts)
        assert counts.get("encode", 0) == evaluated, (figure, counts)
        assert "train_vision" not in counts and "tables" not in counts
    target = f"{scratch}/results/figures/li2024/li2024_fig9.png"
    alone = job_counts(
        run_snakemake(repo_root, "-n", "--quiet", "rules", "--config", *folders(scratch), "--", target)
    )
    assert alone.pop("total") == sum(alone.values())
    assert alone == jobs_upstream(jobs, target), alone


def test_bad_config_stops_the_workflow_with_one_line(repo_root, tmp_path):
    """Through Snakemake, a config error is one ``contrastlab:`` line, exit status 1, no traceback, the
    line the in-process check (workflow_start.start_error) gives."""
    line = one_line_failure(snakemake_process(repo_root, "-n", "--config", "seeds=[forty-two]"))
    expected = "contrastlab: config key seeds[0]: 'forty-two' is not of type 'integer'; write seeds[0] as a "
    expected += "whole number"
    assert line == expected
    from .workflow_start import start_error

    assert start_error(repo_root / "config.yaml", "seeds=[forty-two]") == expected


def _train_runtime(repo_root, tmp_path, *config):
    """The wall time (minutes) the dry run of config.yaml asks for one fp32 training job, Nie's InfoNCE on
    BERT-base."""
    target = f"{tmp_path}/results/checkpoints/nie2023/bert-base/cl/seed42/model"
    overrides = ("--config", *folders(tmp_path), *config)
    output = run_snakemake(repo_root, "-n", "--cores", "1", *overrides, "--", target)
    train = output.split("rule train:", 1)[1]
    return int(re.search(r"\bruntime=(\d+)", train).group(1))


def test_a_job_asks_the_wall_time_of_the_gpu_it_will_get(repo_root, tmp_path):
    """An fp32 cell asks more time on an A100 than on the calibration's H100, more still on a V100; the
    time is the plan's, a retry's more (tests/cost has the rates of each card)."""
    from contrastlab.cost import calibration as cl_calibration
    from contrastlab.cost import plan
    from contrastlab.cost.flops import cell_work

    h100 = _train_runtime(repo_root, tmp_path)
    a100 = _train_runtime(repo_root, tmp_path, "resources={gpu_model: A100}")
    v100 = _train_runtime(repo_root, tmp_path, "resources={gpu_model: v100}")
    assert h100 < a100 < v100, (h100, a100, v100)
    config = cl_config.load(repo_root / "config.yaml", {"resources": {"gpu_model": "A100"}})
    grid = cl_config.Grid(config)
    cell = next(c for c in grid.cells if c.path == "nie2023/bert-base/cl/seed42")
    assert cell_work(grid, cell).precision == "fp32"
    calibration = cl_calibration.for_gpu_model(cl_calibration.load_calibration(), "A100")
    first, second = (
        plan.job_runtime_minutes(grid, "train", calibration, cell=cell, attempt=attempt) for attempt in (1, 2)
    )
    assert first == a100 and second > first
