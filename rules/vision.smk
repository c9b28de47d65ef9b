# The vision track (protocol.md section 3): image data, encoder training, linear/kNN (MACL) or FFN (OAR)
# evaluation.


localrules:
    image_data,


# CIFAR is fetched by a local rule (compute nodes may have no internet); digits ship with scikit-learn.
rule image_data:
    output:
        images_marker("{dataset}"),
    params:
        identity=lambda wildcards: images_identity(wildcards.dataset),
    log:
        f"{R}/logs/data/images-{{dataset}}.log",
    wildcard_constraints:
        dataset="digits|cifar10|cifar100",
    conda:
        "../envs/contrastlab.yaml"
    script:
        "../scripts/prepare_images.py"


rule train_vision:
    input:
        images_ready=cell_images_marker,
        loss_source=loss_source,
    output:
        encoder=directory(f"{R}/checkpoints/{{experiment}}/{{backbone}}/{{method}}/seed{{seed}}/encoder"),
        log_jsonl=f"{R}/checkpoints/{{experiment}}/{{backbone}}/{{method}}/seed{{seed}}/train_log.jsonl",
    params:
        settings=train_settings,
        state_dir=lambda wildcards: f"{R}/state/train/{cell_of(wildcards).path}",
    log:
        f"{R}/logs/train/{{experiment}}/{{backbone}}/{{method}}/seed{{seed}}.log",
    benchmark:
        f"{R}/benchmarks/train/{{experiment}}/{{backbone}}/{{method}}/seed{{seed}}.tsv"
    wildcard_constraints:
        experiment=VISION_EXPERIMENTS,
    threads: THREADS
    resources:
        gpu=GPU,
        gpu_share=gpu_share,
        mem_mb=mem_mb("train"),
        runtime=runtime("vision_train", "train_vision"),
    conda:
        "../envs/contrastlab.yaml"
    script:
        "../scripts/train_vision.py"


rule evaluate_vision:
    input:
        encoder=f"{R}/checkpoints/{{experiment}}/{{backbone}}/{{method}}/seed{{seed}}/encoder",
        images_ready=cell_images_marker,
    output:
        metrics=f"{R}/metrics/{{experiment}}/{{backbone}}/{{method}}/seed{{seed}}/vision.json",
    params:
        evaluation=lambda wildcards: cl_config.vision_evaluation(config, wildcards.experiment),
    log:
        f"{R}/logs/evaluate/{{experiment}}/{{backbone}}/{{method}}/seed{{seed}}.log",
    benchmark:
        f"{R}/benchmarks/evaluate/{{experiment}}/{{backbone}}/{{method}}/seed{{seed}}.tsv"
    wildcard_constraints:
        experiment=VISION_EXPERIMENTS,
    threads: THREADS
    resources:
        # One job on the GPU, unlike the sentence evaluation (rules/evaluate.smk): the linear and FFN
        # probes train on the device, for epochs over the features, so the GPU is not idle while they run.
        gpu=GPU,
        mem_mb=mem_mb("eval"),
        runtime=runtime("eval", "evaluate_vision"),
    conda:
        "../envs/contrastlab.yaml"
    script:
        "../scripts/evaluate_vision.py"
