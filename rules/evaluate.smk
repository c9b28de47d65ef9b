# SentEval-protocol evaluation (protocol.md §4) of trained checkpoints and of the unmodified backbones.


rule evaluate:
    input:
        model=f"{R}/checkpoints/{{experiment}}/{{backbone}}/{{method}}/seed{{seed}}/model",
        senteval_ready=data_marker("senteval"),
    output:
        metrics=f"{R}/metrics/{{experiment}}/{{backbone}}/{{method}}/seed{{seed}}/senteval.json",
    params:
        tasks=config["evaluation"]["tasks"],
        mode=config["evaluation"]["mode"],
        batch_size=config["evaluation"]["batch_size"],
        pooling="cls",
    log:
        f"{R}/logs/evaluate/{{experiment}}/{{backbone}}/{{method}}/seed{{seed}}.log",
    benchmark:
        f"{R}/benchmarks/evaluate/{{experiment}}/{{backbone}}/{{method}}/seed{{seed}}.tsv"
    wildcard_constraints:
        experiment=SENTENCE_EXPERIMENTS,
    threads: THREADS
    resources:
        gpu=GPU,
        mem_mb=mem_mb("eval"),
        runtime=runtime("eval", "evaluate"),
    conda:
        "../envs/contrastlab.yaml"
    script:
        "../scripts/evaluate.py"


rule evaluate_pretrained:
    input:
        model=lambda wildcards: backbone_dir(wildcards.backbone),
        senteval_ready=data_marker("senteval"),
    output:
        metrics=f"{R}/metrics/pretrained/{{backbone}}/senteval.json",
    params:
        tasks=config["evaluation"]["tasks"],
        mode=config["evaluation"]["mode"],
        batch_size=config["evaluation"]["batch_size"],
        pooling=lambda wildcards: PRETRAINED_POOLING[wildcards.backbone],
    log:
        f"{R}/logs/evaluate/pretrained/{{backbone}}.log",
    benchmark:
        f"{R}/benchmarks/evaluate/pretrained/{{backbone}}.tsv"
    threads: THREADS
    resources:
        gpu=GPU,
        mem_mb=mem_mb("eval"),
        runtime=runtime("eval", "evaluate_pretrained"),
    conda:
        "../envs/contrastlab.yaml"
    script:
        "../scripts/evaluate.py"
