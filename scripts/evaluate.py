"""Snakemake entry: the CPU half of a SentEval evaluation of one checkpoint (or unmodified backbone):
the probes, fitted from the embeddings its `encode` job wrote (the model is never loaded here)."""

from contrastlab.workflow.warm import hand_over

hand_over(globals())  # a local job runs in a fork of a process with torch & co. imported (workflow/warm.py)

from contrastlab.evaluation.senteval import evaluate_checkpoint, read_encoding
from contrastlab.paths import write_json
from contrastlab.workflow.job import evaluated_model, evaluation_job, job_data_locations, log_job_test_scores

snakemake = globals()["snakemake"]

with evaluation_job(snakemake) as device:  # the CPU: the rule asks no GPU (resources.gpu: 0)
    model_dir, search = evaluated_model(snakemake)  # a search's winner: named by its selection file
    metrics = evaluate_checkpoint(
        model_dir,
        job_data_locations(snakemake)["senteval_dir"],
        snakemake.params.tasks,
        snakemake.params.mode,
        pooling=snakemake.params.pooling,
        batch_size=snakemake.params.batch_size,
        device=device,
        cache_dir=snakemake.input.embeddings,
        encode_missing=False,  # never encode on the CPU: the encode job did, on its GPU
    )
    # The encode job's record (its device and seconds), kept here: its folder is temporary.
    metrics["encoding"] = read_encoding(snakemake.input.embeddings)
    metrics["timings"]["encode_s"] = metrics["encoding"]["encode_s"]
    metrics["wildcards"] = dict(snakemake.wildcards.items())
    if search is not None:
        metrics["search"] = search
    print({task: round(score, 2) for task, score in metrics["scores"].items()})
    write_json(snakemake.output.metrics, metrics)
    if search is None:  # a cell's own checkpoint: its training's TensorBoard (and W&B) run gets the scores
        log_job_test_scores(snakemake, metrics)
