# One job per cell: train (experiment, backbone, method, seed), keep the best dev checkpoint.


rule train:
    input:
        backbone=lambda wildcards: backbone_dir(wildcards.backbone),
        corpus_ready=f"{S}/data/corpus.ready.json",
        senteval_ready=f"{S}/data/senteval.ready.json",
        loss_source=loss_source,
    output:
        model=directory(f"{R}/checkpoints/{{experiment}}/{{backbone}}/{{method}}/seed{{seed}}/model"),
        log_jsonl=f"{R}/checkpoints/{{experiment}}/{{backbone}}/{{method}}/seed{{seed}}/train_log.jsonl",
    params:
        settings=train_settings,
        corpus=lambda wildcards: corpus_path(),
        dev_data_dir=lambda wildcards: senteval_dir(),
        state_dir=lambda wildcards: f"{S}/state/{cell_of(wildcards).path}",
        cache_dir=lambda wildcards: f"{S}/cache",
    log:
        f"{R}/logs/train/{{experiment}}/{{backbone}}/{{method}}/seed{{seed}}.log",
    benchmark:
        f"{R}/benchmarks/train/{{experiment}}/{{backbone}}/{{method}}/seed{{seed}}.tsv"
    threads: THREADS
    resources:
        gpu=GPU,
        mem_mb=mem_mb("train"),
        runtime=runtime("train"),
    conda:
        "../envs/contrastlab.yaml"
    script:
        "../scripts/train.py"
