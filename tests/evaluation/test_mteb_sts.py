"""MTEB's own evaluator (the mteb package) on a demo checkpoint, and the stand-in data it reads offline
(contrastlab.evaluation.mteb_sts); the whole rule's work (contrastlab.evaluation.bridge.mteb_checkpoint)."""

import json
import shutil

import numpy as np
import pytest
from scipy.stats import spearmanr
from sklearn.metrics.pairwise import paired_cosine_distances

from contrastlab import artifacts
from contrastlab.evaluation import mteb_sts
from contrastlab.evaluation.bridge import BRIDGE_FILE, PROVENANCE_FILE, STEPS, mteb_checkpoint
from contrastlab.evaluation.senteval import evaluate
from contrastlab.models import load_backbone, make_encoder
from contrastlab.models.export import write_sentence_transformers_files
from contrastlab.senteval import protocol as P
from contrastlab.senteval.tasks import load_sts_pairs

mteb = pytest.importorskip("mteb")


@pytest.fixture(scope="module")
def checkpoint(tiny_bert, tmp_path_factory):
    """The demo's tiny BERT as the pipeline exports a kept checkpoint: [CLS] pooling, sentence-transformers
    files."""
    folder = tmp_path_factory.mktemp("ckpt") / "model"
    shutil.copytree(tiny_bert, folder)
    write_sentence_transformers_files(folder, "cls")
    return folder


@pytest.fixture(scope="module")
def distinct_dir(fixture_dir, tmp_path_factory):
    """A copy of the generated SentEval tree whose STS-B test split lacks the pairs of two identical
    sentences (the fixture has two; the real STS-B test has none): their cosine is 1 up to rounding, and
    MTEB's float32 cosine ties them where SentEval's float64 one does not (see the second test)."""
    out = tmp_path_factory.mktemp("distinct") / "senteval"
    shutil.copytree(fixture_dir, out)
    rel = P.SPLIT_FILES["STSBenchmark"]["test"]
    path = out / "downstream" / rel
    lines = path.read_text(encoding="utf-8").splitlines(keepends=True)
    rows = [r for r in lines if r.rstrip("\n").split("\t")[5] != r.rstrip("\n").split("\t")[6]]
    assert len(rows) < len(lines)
    path.write_text("".join(rows), encoding="utf-8")
    manifest = out / "downstream" / P.COUNTS_MANIFEST
    counts = json.loads(manifest.read_text())
    counts["rows"][rel] = len(rows)
    manifest.write_text(json.dumps(counts))
    return out


@pytest.fixture(scope="module")
def rule_output(checkpoint, distinct_dir, tmp_path_factory):
    out = tmp_path_factory.mktemp("mteb") / "cell"
    return out, mteb_checkpoint(
        checkpoint, distinct_dir, out, data="standin", batch_size=16, name="contrastlab/test"
    )


def _mteb_stsb(checkpoint, data_dir, out):
    pairs = load_sts_pairs(data_dir, "STSBenchmark", "test")
    model = mteb_sts.load_sentence_transformer(checkpoint, name="contrastlab/tiny")
    rows = {"STSBenchmark": mteb_sts.PairSet(pairs.a, pairs.b, pairs.gold)}
    return mteb_sts.run_mteb(model, rows, out, tasks=("STSBenchmark",))["STSBenchmark"], model, pairs


def _senteval_stsb(checkpoint, data_dir):
    backbone, tokenizer = load_backbone(checkpoint, device="cpu")
    encode = make_encoder(backbone, tokenizer, pooling="cls", batch_size=8)
    return evaluate(encode, data_dir, ["STSBenchmark"])["STSBenchmark"]


def test_mteb_stsb_equals_the_senteval_protocol_on_the_same_text(checkpoint, distinct_dir, tmp_path):
    # MTEB's STSBenchmark task and evaluator, fed SentEval's STS-B test pairs (the text SentEval encodes),
    # beside the project's SentEval protocol with the project's own encoder of the same checkpoint
    data = distinct_dir
    scores, _, _ = _mteb_stsb(checkpoint, data, tmp_path / "out")
    assert abs(scores["cosine_spearman"] * 100 - _senteval_stsb(checkpoint, data)) <= 1e-6
    # written by MTEB's ResultCache in its results format, readable by MTEB
    (found,) = (tmp_path / "out").glob("results/contrastlab__tiny/*/STSBenchmark.json")
    assert mteb.TaskResult.from_disk(found).get_score() == pytest.approx(scores["main_score"])


def test_identical_sentences_tie_in_mtebs_float32_cosine_only(checkpoint, fixture_dir, tmp_path):
    # The whole fixture: the two identical pairs score cosine 1 and 1 + 2e-16 in our float64 cosine (a
    # rank apart) but exactly 1 in MTEB's float32 (a tie), the only reason the two numbers differ here.
    scores, model, pairs = _mteb_stsb(checkpoint, fixture_dir, tmp_path)
    a, b = model.encode(pairs.a), model.encode(pairs.b)
    tied = spearmanr(1 - paired_cosine_distances(a, b), pairs.gold).statistic * 100
    assert scores["cosine_spearman"] * 100 == pytest.approx(tied, abs=1e-9)
    assert abs(tied - _senteval_stsb(checkpoint, fixture_dir)) > 0.01


def test_the_rule_writes_mteb_results_and_a_bridge_whose_parts_add_up(rule_output, fixture_dir):
    out, result = rule_output
    assert sorted(p.stem for p in out.glob("results/*/*/*.json") if p.stem != "model_meta") == sorted(
        mteb_sts.MTEB_TASKS.values()
    )
    assert json.loads((out / BRIDGE_FILE).read_text()) == json.loads(json.dumps(result))
    # the chain starts at the SentEval protocol's score of the same checkpoint (the rule's encoder: the
    # exported sentence-transformers model, whose vectors equal ours)
    for task, r in result["tasks"].items():
        assert sum(r["parts"].values()) == pytest.approx(r["total"], abs=1e-9), task
        assert list(r["parts"]) == list(STEPS)
    # SICK-R: MTEB scores train + trial + test, so the split step brings in the other splits' pairs
    sick = result["tasks"]["SICKRelatedness"]["counts"]
    assert sick["other_split"] == sick["mteb_pairs"] - sick["senteval_pairs"] > 0
    # STS12-16 and STS-B on the fixture: MTEB's copy is SentEval's file text, so only the arithmetic step
    # remains (the fixture's STS12-16 have identical pairs, which MTEB's float32 cosine ties: not 0 there)
    for task in ("STS12", "STS13", "STS14", "STS15", "STS16", "STSBenchmark"):
        parts = result["tasks"][task]["parts"]
        assert [parts[s] for s in STEPS[:4]] == [0.0, 0.0, 0.0, 0.0], task
    assert abs(result["tasks"]["STSBenchmark"]["parts"]["similarity"]) < 1e-6
    provenance = json.loads((out / PROVENANCE_FILE).read_text())
    assert provenance["data"] == "standin" and provenance["pins"]["STS12"]["path"] == "mteb/sts12-sts"


def test_sentence_transformers_evaluator_equals_mteb_on_stsb(rule_output):
    # same rows (MTEB's), same cosine, same Spearman: ST's evaluator is MTEB's number, not SentEval's
    # (on the fixture MTEB's STS-B text is SentEval's; on the real data it is not, docs/bridge.md)
    _, result = rule_output
    stsb = result["tasks"]["STSBenchmark"]
    assert result["sentence_transformers"]["STSBenchmark"] == pytest.approx(stsb["mteb"], abs=1e-6)


@pytest.mark.shared
def test_the_standin_files_are_mtebs_rows_by_mtebs_own_statistics(shared):
    data = shared / "data"
    found = mteb_sts.standin_check(
        mteb_sts.standin_pairs(data / "senteval", data / "sts-raw-original" / "STSBenchmark")
    )
    assert {task: f["match"] for task, f in found.items()} == {
        **{t: "exact" for t in ("STS12", "STS13", "STS14", "STS15", "STS16", "STSBenchmark")},
        # 9,927 pairs, unique texts and gold mean equal; 0.1% fewer characters in MTEB's copy
        "SICK-R": "same pairs",
    }
    # SentEval's own STS-B copy (tokenised, lowercased) is not MTEB's text
    tokenised = mteb_sts.standin_check(
        {"STSBenchmark": mteb_sts.standin_pairs(data / "senteval")["STSBenchmark"]}
    )
    assert tokenised["STSBenchmark"]["match"] == "different"


def test_hub_datasets_are_pinned_in_the_artifacts_lock_and_checked(tmp_path):
    lock = tmp_path / "artifacts.lock.json"
    rows = {"STS12": mteb_sts.PairSet(["a b"], ["c d"], np.array([1.0]))}
    pins = {"STS12": {"path": "mteb/sts12-sts", "revision": "a0d554a64d88156834ff5ae9920b964011b16384"}}
    mteb_sts.record_pins(lock, rows, pins)
    entry = artifacts.entry(lock, "data", "mteb/sts12-sts@test")
    assert entry["revision"] == pins["STS12"]["revision"] and entry["sha256"] == rows["STS12"].sha256()
    mteb_sts.record_pins(lock, rows, pins)  # the same rows again: fine
    changed = {"STS12": mteb_sts.PairSet(["a b"], ["c e"], np.array([1.0]))}
    with pytest.raises(artifacts.LockMismatch, match="mteb/sts12-sts@test"):
        mteb_sts.record_pins(lock, changed, pins)
    assert "mteb/sts12-sts@test" in artifacts.summary(lock)


def test_the_pins_are_mtebs_task_metadata():
    pins = mteb_sts.task_pins()
    assert pins["STSBenchmark"] == {
        "path": "mteb/stsbenchmark-sts",
        "revision": "b0fddb56ed78048fa8b90373c8a3cfc37b684831",
    }
    assert set(pins) == set(mteb_sts.MTEB_TASKS.values())


@pytest.fixture
def no_network(monkeypatch):
    """Any socket connection fails: what runs under it reads only local files (mteb's task metadata)."""
    import socket

    def refuse(*args, **kwargs):
        raise OSError("no network in this test")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket, "create_connection", refuse)


def names(tasks) -> list[str]:
    return [task.metadata.name for task in tasks]


def test_task_selection_is_mtebs_own_lookup_after_the_seven_sts_tasks(no_network):
    """Tasks and benchmarks are MTEB's own lookups, after the seven STS tasks (a chosen one once)."""
    assert names(mteb_sts.selected_tasks()) == list(mteb_sts.TASK_NAMES)
    chosen = mteb_sts.selected_tasks(["Banking77Classification", "STS12", "SciFact"])
    assert names(chosen) == [*mteb_sts.TASK_NAMES, "Banking77Classification", "SciFact"]
    benchmark = mteb.get_benchmark("MTEB(eng, v2)")
    selected = mteb_sts.selected_tasks(benchmark="MTEB(eng, v2)")
    beyond = [n for n in names(benchmark.tasks) if n not in mteb_sts.TASK_NAMES]
    assert names(selected) == [*mteb_sts.TASK_NAMES, *beyond]
    assert (len(benchmark.tasks), len(selected)) == (41, 42)  # STS16 is not in the benchmark
    with pytest.raises(KeyError, match="STS99"):
        mteb_sts.selected_tasks(["STS99"])
    with pytest.raises(KeyError, match="MTEB\\(foo\\)"):
        mteb_sts.selected_tasks(benchmark="MTEB(foo)")


def test_run_mteb_scores_a_chosen_task_beyond_the_seven(checkpoint, tmp_path, no_network):
    """BIOSSES (an STS task beyond the seven) on a stand-in's rows is scored and written as the seven are."""
    (biosses,) = [t for t in mteb_sts.selected_tasks(["BIOSSES"]) if t.metadata.name == "BIOSSES"]
    a, b = (
        ["a man plays", "the cat sat", "rain falls", "two dogs run"],
        ["a man sings", "a cat", "sun", "dogs run"],
    )
    gold = np.array([3.0, 2.5, 0.5, 4.0])
    model = mteb_sts.load_sentence_transformer(checkpoint, name="contrastlab/tiny")
    rows = {"BIOSSES": mteb_sts.PairSet(a, b, gold)}
    scores = mteb_sts.run_mteb(model, rows, tmp_path, tasks=[biosses])
    vectors = model.encode(a + b, convert_to_numpy=True)
    cosine = 1 - paired_cosine_distances(vectors[:4], vectors[4:])
    assert scores["BIOSSES"]["cosine_spearman"] == pytest.approx(spearmanr(cosine, gold)[0], abs=1e-6)
    written = [p.name for p in tmp_path.glob("results/*/*/*.json") if p.name != "model_meta.json"]
    assert written == ["BIOSSES.json"]


def test_a_task_of_several_subsets_reports_mtebs_mean_main_score():
    """A task with no one default test entry (STS17's subsets) reports mteb's averaged main score."""
    result = mteb.TaskResult.from_task_results(
        mteb.get_task("STS17"),
        {"test": {"en-en": {"main_score": 0.5}, "en-de": {"main_score": 0.7}}},
        evaluation_time=1.0,
    )
    assert mteb_sts._test_scores(result) == {"main_score": pytest.approx(0.6)}


def test_chosen_tasks_beyond_the_seven_need_the_hubs_data(tmp_path):
    with pytest.raises(ValueError, match="mteb.tasks and mteb.benchmark need mteb.data: hub"):
        mteb_checkpoint(tmp_path, tmp_path, tmp_path / "out", data="standin", benchmark="MTEB(eng, v2)")


def test_a_benchmarks_subset_of_a_task_is_scored_and_read_back_as_that_subset(tmp_path, no_network):
    """MTEB(eng, v2) scores STS17's English pair only: its score comes back as that subset's (0.81234 is
    81.234 on the card, "STS17 (en-en)"), the return is mteb's main score; alone, STS17 keeps all 11."""
    from contrastlab.hub import mteb_results

    (sts17,) = [t for t in mteb_sts.selected_tasks(benchmark="MTEB(eng, v2)") if t.metadata.name == "STS17"]
    assert sts17.hf_subsets == ["en-en"] and sts17.metadata.eval_splits == ["test"]
    (named,) = [t for t in mteb_sts.selected_tasks(["STS17"]) if t.metadata.name == "STS17"]
    assert len(named.hf_subsets) == 11 and "en-en" in named.hf_subsets
    scored = {"test": {"en-en": {"cosine_spearman": 0.81234, "cosine_pearson": 0.8, "main_score": 0.81234}}}
    result = mteb.TaskResult.from_task_results(sts17, scored, evaluation_time=1.0)
    assert mteb_sts._test_scores(result) == {"main_score": 0.81234}
    path = tmp_path / "results" / "contrastlab__cell" / "no_revision_available" / "STS17.json"
    path.parent.mkdir(parents=True)
    result.to_disk(path)
    (score,) = mteb_results.mteb_scores(tmp_path)
    got = (score.task, score.split, score.subset, score.metric, score.value)
    assert got == ("STS17", "test", "en-en", "cosine_spearman", 0.81234)
    assert score.dataset == sts17.metadata.dataset["path"]
    assert score.revision == sts17.metadata.dataset["revision"]
    (card,) = mteb_results.mteb_eval_results([score])
    got = (card.dataset_name, card.dataset_config, card.metric_value)
    assert got == ("MTEB STS17 (en-en)", "en-en", 81.234)


def _stub_encoder(model, vectors: dict[str, tuple[float, float]], calls: list[tuple[list[str], int]]):
    """``model.encode`` replaced by a lookup of hand-made 2-d vectors: the scores then follow from them by
    hand. Each call's sentences and batch size go to ``calls``."""

    def encode(sentences, **kwargs):
        calls.append((list(sentences), kwargs.get("batch_size")))
        return np.array([vectors[s] for s in sentences], dtype=np.float32)

    model.encode = encode


def _pairs_at(cosines: list[float], gold: list[float], tag: str):
    """Pairs whose first sentence encodes to (1, 0) and whose second to (c, sqrt(1 - c^2)): cosine c."""
    a = [f"{tag} a{i}" for i in range(len(cosines))]
    b = [f"{tag} b{i}" for i in range(len(cosines))]
    vectors = {s: (1.0, 0.0) for s in a}
    vectors.update({s: (c, float(np.sqrt(1 - c * c))) for s, c in zip(b, cosines, strict=True)})
    return mteb_sts.PairSet(a, b, np.array(gold)), vectors


def test_run_mteb_scores_what_the_encoder_returns_per_task_and_resumes_by_value(
    checkpoint, tmp_path, no_network
):
    """Stub cosines give hand-known Spearmans (STS-B one adjacent swap: 1 - 6 * 2 / (5 * 24) = 0.9; SICK-R
    reversed: -1), each in MTEB's file of its task; ``only-missing`` reuses them, ``always`` scores anew."""
    model = mteb_sts.load_sentence_transformer(checkpoint, name="contrastlab/stub")
    stsb, stsb_vectors = _pairs_at([0.3, 0.7, 0.5, 0.6, 0.1], [1.0, 3.0, 2.0, 4.0, 0.0], "stsb")
    sick, sick_vectors = _pairs_at([0.9, 0.2, 0.5, 0.7], [1.0, 4.0, 2.5, 2.0], "sick")
    calls = []
    _stub_encoder(model, {**stsb_vectors, **sick_vectors}, calls)
    rows = {"STSBenchmark": stsb, "SICK-R": sick}
    scores = mteb_sts.run_mteb(model, rows, tmp_path, tasks=("STSBenchmark", "SICK-R"), batch_size=3)
    assert {task: s["cosine_spearman"] for task, s in scores.items()} == {
        "STSBenchmark": pytest.approx(0.9, abs=1e-12),
        "SICK-R": pytest.approx(-1.0, abs=1e-12),
    }
    assert scores["STSBenchmark"]["main_score"] == scores["STSBenchmark"]["cosine_spearman"]
    pearson = np.corrcoef([0.3, 0.7, 0.5, 0.6, 0.1], [1.0, 3.0, 2.0, 4.0, 0.0])[0, 1]
    assert scores["STSBenchmark"]["cosine_pearson"] == pytest.approx(pearson, abs=1e-6)
    assert sorted(sentence for sentences, _ in calls for sentence in sentences) == sorted(
        [*stsb.sentence1, *stsb.sentence2, *sick.sentence1, *sick.sentence2]
    )
    assert {size for _, size in calls} == {3}
    folder = tmp_path / "results" / "contrastlab__stub" / "no_revision_available"
    written = sorted(p.name for p in folder.glob("*.json"))
    assert written == ["SICK-R.json", "STSBenchmark.json", "model_meta.json"]
    stored = json.loads((folder / "STSBenchmark.json").read_text())["scores"]["test"]
    assert [(row["hf_subset"], row["cosine_spearman"]) for row in stored] == [("default", pytest.approx(0.9))]
    # the same folder again, STS-B's cosines reversed: only-missing keeps what is there, always does not
    flipped, flipped_vectors = _pairs_at([0.7, 0.3, 0.5, 0.1, 0.9], [1.0, 3.0, 2.0, 4.0, 0.0], "stsb")
    assert flipped.sentence2 == stsb.sentence2  # the same text, vectors whose cosines rank the gold reversed
    calls.clear()
    _stub_encoder(model, {**flipped_vectors, **sick_vectors}, calls)
    kept = mteb_sts.run_mteb(model, rows, tmp_path, tasks=("STSBenchmark",), overwrite="only-missing")
    assert kept["STSBenchmark"]["cosine_spearman"] == pytest.approx(0.9, abs=1e-5) and calls == []
    anew = mteb_sts.run_mteb(model, rows, tmp_path, tasks=("STSBenchmark",), overwrite="always")
    assert anew["STSBenchmark"]["cosine_spearman"] == pytest.approx(-1.0, abs=1e-12) and calls
