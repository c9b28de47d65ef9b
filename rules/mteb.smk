# MTEB's own evaluator on every kept sentence checkpoint (config key mteb; off unless mteb.enabled): the seven
# English STS tasks through the mteb package, with the tasks or named benchmark of mteb.tasks / mteb.benchmark
# (mteb.get_task / mteb.get_benchmark), MTEB's results folder, and the bridge from the SentEval protocol to
# MTEB (contrastlab.evaluation.bridge; docs/bridge.md). The tables rule renders the bridge table.


rule mteb:
    input:
        model=RESULTS.checkpoint(CELL, "model"),
        senteval_ready=data_marker("senteval"),
    output:
        folder=directory(RESULTS.mteb(CELL)),
    params:
        data=GRID.options.mteb["data"],
        batch_size=GRID.options.mteb["batch_size"],
        # mteb.tasks / mteb.benchmark become params only where a config sets them, so that a config
        # without them keeps its jobs' params (and reruns nothing)
        **{k: v for k, v in GRID.options.mteb.items() if k in ("tasks", "benchmark") and v is not None},
    log:
        RESULTS.log("mteb", CELL),
    benchmark:
        RESULTS.benchmark("mteb", CELL)
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
        "../scripts/mteb_sts.py"

