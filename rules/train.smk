# One job per cell: train (experiment, backbone, method, seed), keep the best dev checkpoint.


rule train:
    input:
        backbone=lambda wildcards: backbone_dir(wildcards.backbone),
        corpus_ready=data_marker("corpus"),
        senteval_ready=data_marker("senteval"),
        loss_source=get_loss_source,
        search_previous=get_search_previous_stage,  # a later search stage starts from the earlier winner
    output:
        model=directory(RESULTS.checkpoint(CELL, "model")),
        log_jsonl=RESULTS.checkpoint(CELL, "train_log.jsonl"),
    params:
        settings=get_train_settings,
        corpus=lambda wildcards: data_marker_identity("corpus"),  # what, not where: other bytes retrain
        # Where things lie is not a param (a param change retrains): train.py reads the data locations
        # and the cache from the config, and the snapshots sit in this run's state folder.
        state_dir=lambda wildcards: RESULTS.state("train", cell_of(wildcards)),
        # The search point the job trains (None: a configured cell). A function of the output, which
        # Snakemake leaves out of the params trigger: what the point trains is `settings` already, and
        # its grid values and moves must not make every other cell's params new (workflow/points.py).
        point=lambda wildcards, output: search_point_of(wildcards),
    log:
        RESULTS.log("train", CELL),
    benchmark:
        RESULTS.benchmark("train", CELL)
    wildcard_constraints:
        experiment=SENTENCE_EXPERIMENTS,
    threads: THREADS
    group:
        get_gpu_pack  # SLURM: a pack's jobs in one GPU allocation (profiles/slurm's group-components)
    resources:
        gpu=GPU,
        gpu_share=get_gpu_share,
        pack_slots=get_pack_slots,
        mem_mb=mem_mb("train"),
        runtime=runtime("train", "train"),
    conda:
        "../envs/contrastlab.yaml"
    script:
        "../scripts/train.py"
