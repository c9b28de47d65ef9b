# Hyperparameter searches (contrastlab.search; Nie App. A.3, Li App. A.4): each point trains as a cell
# (rules/train.smk); each stage's winner is selected on dev scores only; the last stage's winner alone is
# evaluated on the test sets, as "<method>~searched" (encoded on the GPU, probed on the CPU, like a cell).


localrules:
    search_select,
    searches,
    figure_search,


rule search_select:
    input:
        models=get_search_stage_models,
    output:
        selection=RESULTS.search_stage("{experiment}", "{backbone}", "{method}", "{stage}"),
    params:
        points=get_search_stage_points,
    log:
        RESULTS.log("search", "{experiment}/{backbone}/{method}/stage{stage}"),
    conda:
        "../envs/contrastlab.yaml"
    script:
        "../scripts/search_select.py"


# The winner's test evaluation: a cell's encode and evaluate rules (their params, threads, script and
# sentence-only experiments: image experiments have no searches), reading the checkpoint the last
# stage's selection names.
use rule encode as search_encode with:
    input:
        selection=get_search_last_stage,
        senteval_ready=data_marker("senteval"),
    output:
        embeddings=temp(directory(RESULTS.state("embeddings", SEARCHED_CELL))),
    log:
        RESULTS.log("encode", SEARCHED_CELL),
    benchmark:
        RESULTS.benchmark("search_encode", SEARCHED_CELL)
    resources:
        gpu=GPU,
        mem_mb=mem_mb("eval"),
        runtime=runtime("eval"),


use rule evaluate as search_evaluate with:
    input:
        selection=get_search_last_stage,
        senteval_ready=data_marker("senteval"),
        embeddings=RESULTS.state("embeddings", SEARCHED_CELL),
    output:
        metrics=RESULTS.metrics(SEARCHED_CELL, "sentence"),
    log:
        RESULTS.log("evaluate", SEARCHED_CELL),
    benchmark:
        RESULTS.benchmark("search_evaluate", SEARCHED_CELL)
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
        selections=get_search_figure_inputs,
    output:
        **reported_figure("{experiment}/search"),
    params:
        results_dir=lambda wildcards: R,  # the selections under <R>/search
    log:
        RESULTS.log("figures", "{experiment}-search"),
    wildcard_constraints:
        experiment=_alternatives(e for e, _, _ in SEARCHES),
    conda:
        "../envs/contrastlab.yaml"
    script:
        "../scripts/figure_search.py"
