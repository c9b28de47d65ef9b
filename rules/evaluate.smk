# SentEval-protocol evaluation (protocol.md §4) of trained checkpoints and of the unmodified backbones,
# in two jobs each: `encode` embeds every sentence on the GPU (the only part that needs one), `evaluate`
# fits the probes from those embeddings on the CPU (minutes per cell that would otherwise hold a GPU).
# The embeddings are temp(): deleted once the probe job has read them; a finished cell never needs them
# again, so a run whose metrics are up to date does not re-encode (nor does `make restore`).


rule encode:
    input:
        model=f"{R}/checkpoints/{{experiment}}/{{backbone}}/{{method}}/seed{{seed}}/model",
        senteval_ready=data_marker("senteval"),
    output:
        embeddings=temp(directory(f"{R}/state/embeddings/{{experiment}}/{{backbone}}/{{method}}/seed{{seed}}")),
    params:
        tasks=config["evaluation"]["tasks"],
        mode=config["evaluation"]["mode"],
        batch_size=config["evaluation"]["batch_size"],
        pooling=CELL_POOLING,
    log:
        f"{R}/logs/encode/{{experiment}}/{{backbone}}/{{method}}/seed{{seed}}.log",
    benchmark:
        f"{R}/benchmarks/encode/{{experiment}}/{{backbone}}/{{method}}/seed{{seed}}.tsv"
    wildcard_constraints:
        experiment=SENTENCE_EXPERIMENTS,
    threads: THREADS
    resources:
        gpu=GPU,
        mem_mb=mem_mb("eval"),
        runtime=runtime("eval", "encode"),
    conda:
        "../envs/contrastlab.yaml"
    script:
        "../scripts/encode.py"


rule evaluate:
    input:
        model=f"{R}/checkpoints/{{experiment}}/{{backbone}}/{{method}}/seed{{seed}}/model",
        senteval_ready=data_marker("senteval"),
        embeddings=f"{R}/state/embeddings/{{experiment}}/{{backbone}}/{{method}}/seed{{seed}}",
    output:
        metrics=f"{R}/metrics/{{experiment}}/{{backbone}}/{{method}}/seed{{seed}}/senteval.json",
    params:
        tasks=config["evaluation"]["tasks"],
        mode=config["evaluation"]["mode"],
        batch_size=config["evaluation"]["batch_size"],
        pooling=CELL_POOLING,
    log:
        f"{R}/logs/evaluate/{{experiment}}/{{backbone}}/{{method}}/seed{{seed}}.log",
    benchmark:
        f"{R}/benchmarks/evaluate/{{experiment}}/{{backbone}}/{{method}}/seed{{seed}}.tsv"
    wildcard_constraints:
        experiment=SENTENCE_EXPERIMENTS,
    threads: THREADS
    resources:
        gpu=0,  # the probes run on the CPU: no GPU held (workflow.job_device hides CUDA from the job)
        probe_slots=1,  # profiles/slurm: a group job of probe jobs runs as many at once as it has slots
        mem_mb=mem_mb("eval"),
        runtime=runtime("eval", "evaluate"),
    conda:
        "../envs/contrastlab.yaml"
    script:
        "../scripts/evaluate.py"


# The Pretrained rows: the unmodified backbone, encoded and probed by the cells' rules (their params,
# threads and script), with the backbone's folder and its own pooling. `with:` merges params key by key
# but replaces every other section whole, so input and resources are stated in full.
use rule encode as encode_pretrained with:
    input:
        model=lambda wildcards: backbone_dir(wildcards.backbone),
        senteval_ready=data_marker("senteval"),
    output:
        embeddings=temp(directory(f"{R}/state/embeddings/pretrained/{{backbone}}")),
    params:
        pooling=lambda wildcards: PRETRAINED_POOLING[wildcards.backbone],
    log:
        f"{R}/logs/encode/pretrained/{{backbone}}.log",
    benchmark:
        f"{R}/benchmarks/encode/pretrained/{{backbone}}.tsv"
    resources:
        gpu=GPU,
        mem_mb=mem_mb("eval"),
        runtime=runtime("eval", "encode_pretrained"),


use rule evaluate as evaluate_pretrained with:
    input:
        model=lambda wildcards: backbone_dir(wildcards.backbone),
        senteval_ready=data_marker("senteval"),
        embeddings=f"{R}/state/embeddings/pretrained/{{backbone}}",
    output:
        metrics=f"{R}/metrics/pretrained/{{backbone}}/senteval.json",
    params:
        pooling=lambda wildcards: PRETRAINED_POOLING[wildcards.backbone],
    log:
        f"{R}/logs/evaluate/pretrained/{{backbone}}.log",
    benchmark:
        f"{R}/benchmarks/evaluate/pretrained/{{backbone}}.tsv"
    resources:
        gpu=0,  # the probes run on the CPU, as in rule evaluate
        probe_slots=1,
        mem_mb=mem_mb("eval"),
        runtime=runtime("eval", "evaluate_pretrained"),


# The model card of each kept checkpoint, sentence and image (contrastlab.report.cards): a small output of its own,
# since the scores exist only now and the checkpoint folder is the train job's output (never rewritten).
# The checkpoint is already a sentence-transformers model (the trainer wrote its files); checkpoint +
# card is what `huggingface-cli upload` publishes. Nothing is uploaded here.
localrules:
    model_card,
    model_card_vision,


rule model_card:
    input:
        model=f"{R}/checkpoints/{{experiment}}/{{backbone}}/{{method}}/seed{{seed}}/model",
        metrics=f"{R}/metrics/{{experiment}}/{{backbone}}/{{method}}/seed{{seed}}/senteval.json",
        senteval_ready=data_marker("senteval"),
        corpus_ready=data_marker("corpus"),
    output:
        card=f"{R}/cards/{{experiment}}/{{backbone}}/{{method}}/seed{{seed}}/README.md",
    params:
        base_model=lambda wildcards: config["backbones"][wildcards.backbone].get("hf_id"),
    log:
        f"{R}/logs/model_card/{{experiment}}/{{backbone}}/{{method}}/seed{{seed}}.log",
    wildcard_constraints:
        experiment=SENTENCE_EXPERIMENTS,
    conda:
        "../envs/contrastlab.yaml"
    script:
        "../scripts/model_card.py"


rule model_card_vision:
    input:
        model=f"{R}/checkpoints/{{experiment}}/{{backbone}}/{{method}}/seed{{seed}}/encoder",
        metrics=f"{R}/metrics/{{experiment}}/{{backbone}}/{{method}}/seed{{seed}}/vision.json",
        images_ready=cell_images_marker,
    output:
        card=f"{R}/cards/{{experiment}}/{{backbone}}/{{method}}/seed{{seed}}/README.md",
    log:
        f"{R}/logs/model_card/{{experiment}}/{{backbone}}/{{method}}/seed{{seed}}.log",
    wildcard_constraints:
        experiment=VISION_EXPERIMENTS,
    conda:
        "../envs/contrastlab.yaml"
    script:
        "../scripts/model_card.py"
