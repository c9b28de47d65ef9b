"""Snakemake entry of rule ``mteb``: MTEB's seven English STS tasks on one checkpoint through the mteb
package, results in MTEB's format, and the bridge from the SentEval protocol
(contrastlab.evaluation.bridge)."""

from contrastlab.evaluation.bridge import mteb_checkpoint
from contrastlab.workflow.job import evaluation_job, job_data_locations

snakemake = globals()["snakemake"]

with evaluation_job(snakemake) as device:
    config, w = snakemake.config, snakemake.wildcards
    result = mteb_checkpoint(
        snakemake.input.model,
        job_data_locations(snakemake)["senteval_dir"],
        snakemake.output.folder,
        data=snakemake.params.data,
        stsb_dir=config["mteb"]["stsb_dir"],  # read, not a param: moving the data reruns nothing
        batch_size=snakemake.params.batch_size,
        device=device,
        name=f"contrastlab/{w.experiment}-{w.backbone}-{w.method}-seed{w.seed}",
        lock_file=config["artifacts_lock"],
    )
    print({task: round(r["mteb"], 2) for task, r in result["tasks"].items()})
