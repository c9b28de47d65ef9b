# Hyperparameter searches (contrastlab.search; Nie App. A.3, Li App. A.4): each point trains as a cell
# (rules/train.smk); each stage's winner is selected on dev scores only; the last stage's winner alone is
# evaluated on the test sets, as "<method>~searched" (encoded on the GPU, probed on the CPU, like a cell).


localrules:
    search_select,
    searches,
    figure_search,


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


# The winner's test evaluation: a cell's encode and evaluate rules (their params, threads, script and
# sentence-only experiments: image experiments have no searches), reading the checkpoint the last
# stage's selection names.
use rule encode as search_encode with:
    input:
        selection=search_last_stage,
        senteval_ready=data_marker("senteval"),
    output:
        embeddings=temp(directory(f"{R}/state/embeddings/{{experiment}}/{{backbone}}/{{method}}~searched/seed{{seed}}")),
    log:
        f"{R}/logs/encode/{{experiment}}/{{backbone}}/{{method}}~searched/seed{{seed}}.log",
    benchmark:  # where a cell's encode job writes it: the cost table counts it the same way
        f"{R}/benchmarks/encode/{{experiment}}/{{backbone}}/{{method}}~searched/seed{{seed}}.tsv"
    resources:
        gpu=GPU,
        mem_mb=mem_mb("eval"),
        runtime=runtime("eval"),


use rule evaluate as search_evaluate with:
    input:
        selection=search_last_stage,
        senteval_ready=data_marker("senteval"),
        embeddings=f"{R}/state/embeddings/{{experiment}}/{{backbone}}/{{method}}~searched/seed{{seed}}",
    output:
        metrics=f"{R}/metrics/{{experiment}}/{{backbone}}/{{method}}~searched/seed{{seed}}/senteval.json",
    log:
        f"{R}/logs/evaluate/{{experiment}}/{{backbone}}/{{method}}~searched/seed{{seed}}.log",
    benchmark:
        f"{R}/benchmarks/evaluate/{{experiment}}/{{backbone}}/{{method}}~searched/seed{{seed}}.tsv"
    resources:
        gpu=0,  # the probes run on the CPU; search_encode held the GPU
        probe_slots=1,
        mem_mb=mem_mb("eval"),
        runtime=runtime("eval"),


rule searches:
    input:
        search_outputs(),


rule figure_search:
    input:
        selections=search_figure_inputs,
    output:
        **reported_figure("{experiment}/search"),
    params:
        results_dir=lambda wildcards: R,  # the selections under <R>/search
    log:
        f"{R}/logs/figures/{{experiment}}-search.log",
    wildcard_constraints:
        experiment=_alternatives(e for e, _, _ in SEARCHES),
    conda:
        "../envs/contrastlab.yaml"
    script:
        "../scripts/figure_search.py"
