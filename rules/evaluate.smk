# SentEval-protocol evaluation (protocol.md §4) of trained checkpoints and of the unmodified backbones,
# in two jobs each: `encode` embeds every sentence on the GPU (the only part that needs one), `evaluate`
# fits the probes from those embeddings on the CPU (minutes per cell that would otherwise hold a GPU).
# The embeddings are temp(): deleted once the probe job has read them; a finished cell never needs them
# again, so a run whose metrics are up to date does not re-encode (nor does `make restore`).


rule encode:
    input:
        model=RESULTS.checkpoint(CELL, "model"),
        senteval_ready=data_marker("senteval"),
    output:
        embeddings=temp(directory(RESULTS.state("embeddings", CELL))),
    params:
        tasks=GRID.options.evaluation["tasks"],
        mode=GRID.options.evaluation["mode"],
        batch_size=GRID.options.evaluation["batch_size"],
        pooling=CELL_POOLING,
    log:
        RESULTS.log("encode", CELL),
    benchmark:
        RESULTS.benchmark("encode", CELL)
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
        model=RESULTS.checkpoint(CELL, "model"),
        senteval_ready=data_marker("senteval"),
        embeddings=RESULTS.state("embeddings", CELL),
    output:
        metrics=RESULTS.metrics(CELL, "sentence"),
    params:
        tasks=GRID.options.evaluation["tasks"],
        mode=GRID.options.evaluation["mode"],
        batch_size=GRID.options.evaluation["batch_size"],
        pooling=CELL_POOLING,
    log:
        RESULTS.log("evaluate", CELL),
    benchmark:
        RESULTS.benchmark("evaluate", CELL)
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
        embeddings=temp(directory(RESULTS.state("embeddings", PRETRAINED_PLACE))),
    params:
        pooling=lambda wildcards: PRETRAINED_POOLING[wildcards.backbone],
    log:
        RESULTS.log("encode", PRETRAINED_PLACE),
    benchmark:
        RESULTS.benchmark("encode_pretrained", PRETRAINED_PLACE)
    resources:
        gpu=GPU,
        mem_mb=mem_mb("eval"),
        runtime=runtime("eval", "encode_pretrained"),


use rule evaluate as evaluate_pretrained with:
    input:
        model=lambda wildcards: backbone_dir(wildcards.backbone),
        senteval_ready=data_marker("senteval"),
        embeddings=RESULTS.state("embeddings", PRETRAINED_PLACE),
    output:
        metrics=RESULTS.metrics(PRETRAINED_PLACE, "sentence"),
    params:
        pooling=lambda wildcards: PRETRAINED_POOLING[wildcards.backbone],
    log:
        RESULTS.log("evaluate", PRETRAINED_PLACE),
    benchmark:
        RESULTS.benchmark("evaluate_pretrained", PRETRAINED_PLACE)
    resources:
        gpu=0,  # the probes run on the CPU, as in rule evaluate
        probe_slots=1,
        mem_mb=mem_mb("eval"),
        runtime=runtime("eval", "evaluate_pretrained"),
