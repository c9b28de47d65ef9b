"""Snakemake entry: the GPU half of a SentEval evaluation: every sentence it needs, encoded by one
checkpoint (or unmodified backbone) into the job's embeddings folder, where the CPU job `evaluate` reads
them. ``encoding.json`` there records how (device, sentences, seconds, versions, the job's phases and
start), for its metrics."""

from contrastlab.workflow.warm import hand_over

hand_over(globals())  # a local job runs in a fork of a process with torch & co. imported (workflow/warm.py)

from pathlib import Path

from contrastlab.evaluation.senteval import ENCODING_RECORD, encode_checkpoint
from contrastlab.paths import write_json
from contrastlab.training.phases import Phases
from contrastlab.workflow.job import evaluated_model, evaluation_job, job_data_locations

snakemake = globals()["snakemake"]

with evaluation_job(snakemake) as device:  # its own GPU (or the CPU with resources.gpu: 0)
    phases = Phases()  # from the process's start: interpreter, imports, then the encoding (training.phases)
    model_dir, _ = evaluated_model(snakemake)  # a search's winner: named by its selection file
    encoding = encode_checkpoint(
        model_dir,
        job_data_locations(snakemake)["senteval_dir"],
        snakemake.params.tasks,
        snakemake.params.mode,
        cache_dir=snakemake.output.embeddings,
        pooling=snakemake.params.pooling,
        batch_size=snakemake.params.batch_size,
        device=device,
    )
    phases.mark("encode_s")  # the checkpoint loaded (CUDA started) and every sentence encoded
    encoding.update(phases.record())
    print(f"{encoding['sentences']} sentences on {encoding['device_name']} in {encoding['encode_s']:.1f} s")
    write_json(Path(snakemake.output.embeddings) / ENCODING_RECORD, encoding)
