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
        RESULTS.log("data", "images-{dataset}"),
    wildcard_constraints:
        dataset="digits|cifar10|cifar100",
    conda:
        "../envs/contrastlab.yaml"
    script:
        "../scripts/prepare_images.py"


rule train_vision:
    input:
        images_ready=get_cell_images_marker,
        loss_source=get_loss_source,
    output:
        encoder=directory(RESULTS.checkpoint(CELL, "encoder")),
        log_jsonl=RESULTS.checkpoint(CELL, "train_log.jsonl"),
    params:
        settings=get_train_settings,
        state_dir=lambda wildcards: RESULTS.state("train", cell_of(wildcards)),
        # Whether the cell is a point of its experiment's sweep (a diverged point is a result, not a
        # failure). A function of the output, which Snakemake leaves out of the params trigger: it changes
        # what a divergence means, not what trains, so finished cells keep their params.
        is_point=lambda wildcards, output: GRID.experiment(wildcards.experiment).is_sweep_point(
            wildcards.method
        ),
    log:
        RESULTS.log("train", CELL),
    benchmark:
        RESULTS.benchmark("train_vision", CELL)
    wildcard_constraints:
        experiment=VISION_EXPERIMENTS,
    threads: THREADS
    group:
        get_gpu_pack  # SLURM: a pack's jobs in one GPU allocation (profiles/slurm's group-components)
    resources:
        gpu=GPU,
        gpu_share=get_gpu_share,
        pack_slots=get_pack_slots,
        mem_mb=mem_mb("train"),
        runtime=runtime("vision_train", "train_vision"),
    conda:
        "../envs/contrastlab.yaml"
    script:
        "../scripts/train_vision.py"


# An image evaluation is two jobs, as the SentEval one (rules/evaluate.smk): `encode_vision` extracts the
# frozen features on the GPU (the only part that needs one: seconds to minutes), `evaluate_vision` fits
# the probes from them on the CPU (the linear and kNN probes, OAR's FFN: every probe trains on frozen
# features; thousands of small launch-bound steps a CPU runs about as fast). The features are temp():
# deleted once the probe job has read them.
rule encode_vision:
    input:
        encoder=RESULTS.checkpoint(CELL, "encoder"),
        images_ready=get_cell_images_marker,
    output:
        features=temp(RESULTS.state("features", CELL) + ".pt"),
    params:
        batch_size=lambda wildcards: GRID.experiment(wildcards.experiment).vision_evaluation["batch_size"],
    log:
        RESULTS.log("encode", CELL),
    benchmark:
        RESULTS.benchmark("encode_vision", CELL)
    wildcard_constraints:
        experiment=VISION_EXPERIMENTS,
    threads: THREADS
    resources:
        gpu=GPU,
        mem_mb=mem_mb("eval"),
        runtime=runtime("eval", "encode_vision"),
    conda:
        "../envs/contrastlab.yaml"
    script:
        "../scripts/encode_vision.py"


rule evaluate_vision:
    input:
        encoder=RESULTS.checkpoint(CELL, "encoder"),
        features=RESULTS.state("features", CELL) + ".pt",
    output:
        metrics=RESULTS.metrics(CELL, "vision"),
    params:
        evaluation=lambda wildcards: GRID.experiment(wildcards.experiment).vision_evaluation,
    log:
        RESULTS.log("evaluate", CELL),
    benchmark:
        RESULTS.benchmark("evaluate_vision", CELL)
    wildcard_constraints:
        experiment=VISION_EXPERIMENTS,
    threads: THREADS
    resources:
        gpu=0,  # the probes run on the CPU: no GPU held (workflow.job_device hides CUDA from the job)
        mem_mb=mem_mb("eval"),
        runtime=runtime("eval", "evaluate_vision"),
    conda:
        "../envs/contrastlab.yaml"
    script:
        "../scripts/evaluate_vision.py"
