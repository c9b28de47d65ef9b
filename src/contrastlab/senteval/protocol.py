"""The SentEval protocol (protocol.md §4) written as data: task names, files, counts, modes, L2 grid.

Every value cites where it comes from. "SentEval" means SimCSE's copy of SentEval (the version behind
the papers' numbers): ``senteval/engine.py`` (task → files), ``senteval/sts.py``, ``binary.py``,
``sst.py``, ``trec.py``, ``mrpc.py`` (readers), ``senteval/tools/validation.py`` (cross-validation) and
SimCSE's ``evaluation.py`` (modes). Nothing here is read from the data: the loaders check the data
against these numbers.
"""

from __future__ import annotations

from types import MappingProxyType

STS_TASKS = ("STS12", "STS13", "STS14", "STS15", "STS16", "STSBenchmark", "SICKRelatedness")
TRANSFER_TASKS = ("MR", "CR", "SUBJ", "MPQA", "SST2", "TREC", "MRPC")
TASKS = STS_TASKS + TRANSFER_TASKS
# The averages a metrics file holds (protocol.md §4): STS.Avg, TR.Avg, and TR.Avg of the dev accuracies.
AVERAGED = MappingProxyType({"sts_avg": STS_TASKS, "tr_avg": TRANSFER_TASKS, "tr_devacc_avg": TRANSFER_TASKS})
# protocol.md §4's names of three tasks, taken too (evaluate answers under the name given).
TASK_ALIASES = MappingProxyType({"STS-B": "STSBenchmark", "SICK-R": "SICKRelatedness", "SST-2": "SST2"})
MODES = ("test", "fasttest", "dev")

# SimCSE evaluation.py: `test` uses kfold 10, `dev`/`fasttest` kfold 5.
KFOLD = MappingProxyType({"test": 10, "fasttest": 5, "dev": 5})
# validation.py with usepytorch=True: regs = [10**t for t in range(-5, -1)] (Adam weight_decay values).
L2_GRID = (1e-5, 1e-4, 1e-3, 1e-2)
# engine.py: params.seed = 1111; StratifiedKFold(..., shuffle=True, random_state=1111) everywhere.
SEED = 1111

# Which split STS-B / SICK-R report: test split, dev split in `dev` mode (SimCSE evaluation.py).
STS_SPLIT_BY_MODE = MappingProxyType({"test": "test", "fasttest": "test", "dev": "dev"})

# Sub-datasets of STS12-16 (sts.py: STS1xEval.datasets) with the number of scored pairs in each.
# STS13's SMT file is absent by licence; STS15/16 gold files hold empty rows (pairs without a score)
# that SentEval drops (`raw_scores != ''`), so the counts below are after dropping them.
STS_SUBSETS = MappingProxyType(
    {
        "STS12": {
            "MSRpar": 750,
            "MSRvid": 750,
            "SMTeuroparl": 459,
            "surprise.OnWN": 750,
            "surprise.SMTnews": 399,
        },
        "STS13": {"FNWN": 189, "headlines": 750, "OnWN": 561},
        "STS14": {
            "deft-forum": 450,
            "deft-news": 300,
            "headlines": 750,
            "images": 750,
            "OnWN": 750,
            "tweet-news": 750,
        },
        "STS15": {
            "answers-forums": 375,
            "answers-students": 750,
            "belief": 375,
            "headlines": 750,
            "images": 750,
        },
        "STS16": {
            "answer-answer": 254,
            "headlines": 249,
            "plagiarism": 230,
            "postediting": 244,
            "question-question": 209,
        },
    }
)
STS_DIRS = MappingProxyType({t: f"STS/{t}-en-test" for t in STS_SUBSETS})

# Split files (engine.py / sts.py / sst.py / trec.py / mrpc.py) and their row counts (protocol.md §4).
SPLIT_FILES = MappingProxyType(
    {
        "STSBenchmark": {
            "train": "STS/STSBenchmark/sts-train.csv",
            "dev": "STS/STSBenchmark/sts-dev.csv",
            "test": "STS/STSBenchmark/sts-test.csv",
        },
        "SICKRelatedness": {
            "train": "SICK/SICK_train.txt",
            "dev": "SICK/SICK_trial.txt",
            "test": "SICK/SICK_test_annotated.txt",
        },
        "SST2": {
            "train": "SST/binary/sentiment-train",
            "dev": "SST/binary/sentiment-dev",
            "test": "SST/binary/sentiment-test",
        },
        "TREC": {"train": "TREC/train_5500.label", "test": "TREC/TREC_10.label"},
        "MRPC": {"train": "MRPC/msr_paraphrase_train.txt", "test": "MRPC/msr_paraphrase_test.txt"},
    }
)
# binary.py: (file of label 1, file of label 0). SUBJ: objective = 1, subjective = 0.
BINARY_FILES = MappingProxyType(
    {
        "MR": ("MR/rt-polarity.pos", "MR/rt-polarity.neg"),
        "CR": ("CR/custrev.pos", "CR/custrev.neg"),
        "SUBJ": ("SUBJ/subj.objective", "SUBJ/subj.subjective"),
        "MPQA": ("MPQA/mpqa.pos", "MPQA/mpqa.neg"),
    }
)
# trec.py: the six coarse classes.
TREC_CLASSES = ("ABBR", "DESC", "ENTY", "HUM", "LOC", "NUM")
NCLASSES = MappingProxyType({"MR": 2, "CR": 2, "SUBJ": 2, "MPQA": 2, "SST2": 2, "TREC": 6, "MRPC": 2})

# Rows (samples) per file, as SentEval reads them: protocol.md §4 totals split per file. For STS12-16
# the key is the gold file and the value the scored pairs. Binary files include SentEval's empty lines.
EXPECTED_ROWS = MappingProxyType(
    {
        **{
            f"{STS_DIRS[task]}/STS.gs.{name}.txt": n
            for task, subsets in STS_SUBSETS.items()
            for name, n in subsets.items()
        },
        "STS/STSBenchmark/sts-train.csv": 5749,
        "STS/STSBenchmark/sts-dev.csv": 1500,
        "STS/STSBenchmark/sts-test.csv": 1379,
        "SICK/SICK_train.txt": 4500,
        "SICK/SICK_trial.txt": 500,
        "SICK/SICK_test_annotated.txt": 4927,
        "MR/rt-polarity.pos": 5331,
        "MR/rt-polarity.neg": 5331,
        "CR/custrev.pos": 2407,
        "CR/custrev.neg": 1368,
        "SUBJ/subj.objective": 5000,
        "SUBJ/subj.subjective": 5000,
        "MPQA/mpqa.pos": 3312,
        "MPQA/mpqa.neg": 7294,
        "SST/binary/sentiment-train": 67349,
        "SST/binary/sentiment-dev": 872,
        "SST/binary/sentiment-test": 1821,
        "TREC/train_5500.label": 5452,
        "TREC/TREC_10.label": 500,
        "MRPC/msr_paraphrase_train.txt": 4076,
        "MRPC/msr_paraphrase_test.txt": 1725,
    }
)
# protocol.md §4 totals per task, as written there (a test checks EXPECTED_ROWS adds up to them).
PROTOCOL_TOTALS = MappingProxyType(
    {
        "STS12": 3108,
        "STS13": 1500,
        "STS14": 3750,
        "STS15": 3000,
        "STS16": 1186,
        "STSBenchmark": (5749, 1500, 1379),
        "SICKRelatedness": (4500, 500, 4927),
        "MR": 10662,
        "CR": 3775,
        "SUBJ": 10000,
        "MPQA": 10606,
        "SST2": (67349, 872, 1821),
        "TREC": (5452, 500),
        "MRPC": (4076, 1725),
    }
)
# A generated fixture tree (contrastlab.data.fixtures) carries its own counts in this file, in the same
# {relative path: rows} form; the loaders check against it instead of EXPECTED_ROWS.
COUNTS_MANIFEST = "contrastlab-counts.json"

# Alignment/uniformity (Wang & Isola 2020, as Nie 2023 Fig. 1 / Li 2024 Fig. 5 use them): STS-B pairs
# with gold score >= 4 are positives; uniformity uses t = 2. Embeddings are L2-normalised first.
ALIGNMENT_MIN_SCORE = 4.0
UNIFORMITY_T = 2.0
# Their split, as Nie's Fig. 1a ("on STS-B development set", §3.1); a metrics file names it under
# "alignment_split" (one without the key measured them on test).
ALIGNMENT_SPLIT = "dev"


def check_tasks(tasks) -> tuple[str, ...]:
    """Task names (contracts.md's, or a TASK_ALIASES key; one may be a string) in order, no duplicates."""
    tasks = tuple(TASK_ALIASES.get(t, t) for t in ((tasks,) if isinstance(tasks, str) else tasks))
    unknown = [t for t in tasks if t not in TASKS]
    if unknown:
        raise ValueError(f"unknown SentEval task(s) {unknown}; valid: {' '.join(TASKS)}")
    if len(set(tasks)) != len(tasks):
        raise ValueError(f"duplicate tasks in {list(tasks)}")
    return tasks


def check_mode(mode: str) -> str:
    if mode not in MODES:
        raise ValueError(f"unknown mode {mode!r}; choose one of {', '.join(MODES)}")
    return mode


#: The pooling every trained sentence cell is evaluated with: the last layer's [CLS] before BERT's pooler
#: (protocol.md §4; SimCSE's ``cls_before_pooler``, what the three papers evaluate after training). One
#: setting for all cells, so it is a constant rather than a config key: the ``encode``/``evaluate`` rules
#: pass it to the evaluator and the trainer writes the sentence-transformers files of each kept checkpoint
#: with it (``models.export``). The "Pretrained" rows use the experiment's ``pretrained_pooling``.
CELL_POOLING = "cls"
