# Hyperparameter searches (contrastlab.search; Nie App. A.3, Li App. A.4): each point trains as a cell
# (rules/train.smk); each stage's winner is selected on dev scores only; the last stage's winner alone is
# evaluated on the test sets, as "<method>~searched".

SEARCHES = cl_search.searches(SEARCH_POINTS)


localrules:
    search_select,
    searches,
    figure_search,


def search_stage_models(wildcards):
    """The checkpoints of one stage's points (a point shared with a configured cell: that cell's)."""
    points = SEARCHES[(wildcards.experiment, wildcards.backbone, wildcards.method)][int(wildcards.stage)]
    return [f"{R}/checkpoints/{p.cell.path}/model" for p in points]


def search_stage_points(wildcards):
    points = SEARCHES[(wildcards.experiment, wildcards.backbone, wildcards.method)][int(wildcards.stage)]
    return [dataclasses.asdict(p) for p in points]


def search_last_stage(wildcards):
    stages = SEARCHES[(wildcards.experiment, wildcards.backbone, wildcards.method)]
    return search_stage_file(wildcards.experiment, wildcards.backbone, wildcards.method, max(stages))


def search_outputs():
    """Every stage's selection and every search's evaluated winner."""
    out = []
    for (experiment, backbone, method), stages in SEARCHES.items():
        out += [search_stage_file(experiment, backbone, method, k) for k in stages]
        seed = stages[1][0].seed
        out.append(f"{R}/metrics/{experiment}/{backbone}/{cl_search.searched_method(method)}/seed{seed}/senteval.json")
    return out


rule search_select:
    input:
        models=search_stage_models,
    output:
        selection=f"{R}/search/{{experiment}}/{{backbone}}/{{method}}/stage{{stage}}.json",
    params:
        points=search_stage_points,
    log:
        f"{R}/logs/search/{{experiment}}/{{backbone}}/{{method}}/stage{{stage}}.log",
    conda:
        "../envs/contrastlab.yaml"
    script:
        "../scripts/search_select.py"


rule search_evaluate:
    input:
        selection=search_last_stage,
        senteval_ready=data_marker("senteval"),
    output:
        metrics=f"{R}/metrics/{{experiment}}/{{backbone}}/{{method}}~searched/seed{{seed}}/senteval.json",
    params:
        tasks=config["evaluation"]["tasks"],
        mode=config["evaluation"]["mode"],
        batch_size=config["evaluation"]["batch_size"],
        pooling="cls",
    log:
        f"{R}/logs/search/{{experiment}}/{{backbone}}/{{method}}/evaluate-seed{{seed}}.log",
    benchmark:
        f"{R}/benchmarks/search_evaluate/{{experiment}}/{{backbone}}/{{method}}/seed{{seed}}.tsv"
    threads: THREADS
    resources:
        gpu=GPU,
        mem_mb=mem_mb("eval"),
        runtime=runtime("eval"),
    conda:
        "../envs/contrastlab.yaml"
    script:
        "../scripts/search_evaluate.py"


rule searches:
    input:
        search_outputs(),


def search_table_inputs(wildcards):
    """What the tables read of the searches: everything, when they run with the default target."""
    if not config["searches"]["in_all"]:
        return []
    return existing_if_partial(search_outputs())


def search_figure_inputs(wildcards):
    return existing_if_partial(
        search_stage_file(e, b, m, k)
        for (e, b, m), stages in SEARCHES.items()
        if e == wildcards.experiment
        for k in stages
    )


rule figure_search:
    input:
        selections=search_figure_inputs,
    output:
        **figure_files("{experiment}/search"),
    params:
        results_dir=R,
    log:
        f"{R}/logs/figures/{{experiment}}-search.log",
    wildcard_constraints:
        experiment=_alternatives(e for e, _, _ in SEARCHES),
    conda:
        "../envs/contrastlab.yaml"
    script:
        "../scripts/figure_search.py"
