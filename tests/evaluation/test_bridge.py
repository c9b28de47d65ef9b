"""The bridge from the SentEval protocol to MTEB (contrastlab.evaluation.bridge), on hand-made pairs and a
bag-of-words encoder: each step changes one thing, and the parts add up to the total."""

import numpy as np
import pytest

from contrastlab.evaluation.bridge import STEPS, bridge_task
from contrastlab.evaluation.mteb_sts import PairSet
from contrastlab.evaluation.senteval import score_sts
from contrastlab.senteval.tasks import Pairs


def _encode(sentences):
    """Letters counted (a-z), case kept apart: 'The' and 'the' differ, as a cased encoder's would."""
    out = np.zeros((len(sentences), 52))
    for i, s in enumerate(sentences):
        for ch in s:
            if ch.isascii() and ch.isalpha():
                out[i, ord(ch.lower()) - 97 + (26 if ch.isupper() else 0)] += 1
    return out + 1e-3


SE_A = ["the cat sat .", "a dog ran", "it 's raining", "birds fly high", "fish swim deep", "no gold here"]
SE_B = ["the cat is sitting .", "a dog runs", "it is raining", "planes fly low", "people walk", "x"]
GOLD = np.array([4.0, 3.5, 4.5, 1.0, 0.5, 2.0])


def _case():
    # SentEval's scored pairs, in two sub-datasets; MTEB's copy: cased and detokenised text, the last
    # SentEval pair missing, one pair of its own, and two pairs SentEval holds in another split.
    scored = [Pairs("s1", SE_A[:3], SE_B[:3], GOLD[:3]), Pairs("s2", SE_A[3:], SE_B[3:], GOLD[3:])]
    other = [Pairs("train", ["trees grow", "rain falls"], ["trees grew", "snow falls"], np.array([4.2, 2.2]))]
    rows = [
        ("The cat sat.", "The cat is sitting.", 4.0),
        ("A dog ran", "A dog runs", 3.5),
        ("It's raining", "It is raining", 4.5),
        ("Birds fly high", "Planes fly low", 1.0),
        ("Fish swim deep", "People walk", 0.5),
        ("Lions roar", "cats purr", 0.8),
        ("Trees grow", "Trees grew", 4.2),
        ("Rain falls", "Snow falls", 2.2),
    ]
    a, b, gold = zip(*rows, strict=True)
    return scored, other, PairSet(list(a), list(b), np.array(gold))


def test_the_parts_add_up_to_mteb_minus_senteval_and_each_step_is_one_change():
    scored, other, mteb = _case()
    r = bridge_task(_encode, scored, other, mteb, mteb_score=55.0)
    assert r["senteval"] == pytest.approx(score_sts(lambda s: _encode(s), scored), abs=1e-12)
    assert sum(r["parts"].values()) == pytest.approx(r["total"], abs=1e-9)
    assert r["total"] == pytest.approx(55.0 - r["senteval"], abs=1e-12)
    assert list(r["parts"]) == list(STEPS)
    assert r["counts"] == {
        "senteval_pairs": 6,
        "mteb_pairs": 8,
        "text_changed": 5,  # every matched pair's text differs (case, tokenisation)
        "senteval_only": 1,  # 'no gold here'
        "mteb_only": 1,  # 'Lions roar'
        "other_split": 2,  # the train split's two pairs
    }
    # pooling: SentEval's "all" is one set already, so MTEB's single set changes nothing
    assert r["parts"]["pooling"] == 0.0
    # the text step alone: SentEval's five matched pairs in MTEB's text, the sixth unchanged
    texts = [
        Pairs("s1", mteb.sentence1[:3], mteb.sentence2[:3], GOLD[:3]),
        Pairs("s2", mteb.sentence1[3:5] + [SE_A[5]], mteb.sentence2[3:5] + [SE_B[5]], GOLD[3:]),
    ]
    assert r["chain"]["text_form"] == pytest.approx(score_sts(_encode, texts), abs=1e-12)
    # the split step ends on every MTEB row; the similarity step is MTEB's own number minus ours there
    everything = score_sts(_encode, [Pairs("m", mteb.sentence1, mteb.sentence2, mteb.score)])
    assert r["chain"]["split"] == pytest.approx(everything, abs=1e-12)
    assert r["parts"]["similarity"] == pytest.approx(55.0 - everything, abs=1e-12)


def test_identical_copies_give_zero_parts_but_the_arithmetic():
    scored, _, _ = _case()
    same = PairSet(SE_A, SE_B, GOLD)  # the scored sub-datasets concatenated
    start = score_sts(_encode, scored)
    r = bridge_task(_encode, scored, [], same, mteb_score=start + 1e-7)
    assert [r["parts"][s] for s in STEPS[:4]] == [0.0, 0.0, 0.0, 0.0]
    assert r["parts"]["similarity"] == pytest.approx(1e-7, abs=1e-12)


def test_the_command_without_the_hub_says_so_in_one_line(monkeypatch, tmp_path):
    """Offline, ``python -m contrastlab.evaluation.bridge`` (hub data) stops with one line and the fix."""
    from contrastlab.evaluation import bridge

    def unreachable(*args, **kwargs):
        raise ConnectionError("Couldn't reach 'mteb/sts12-sts' on the Hub (LocalEntryNotFoundError)")

    monkeypatch.setattr(bridge, "mteb_checkpoint", unreachable)
    with pytest.raises(SystemExit) as stop:
        bridge.main([str(tmp_path / "model"), str(tmp_path / "senteval"), str(tmp_path / "out")])
    assert str(stop.value) == (
        "contrastlab: ConnectionError: Couldn't reach 'mteb/sts12-sts' on the Hub (LocalEntryNotFoundError); "
        "MTEB's rows come from the hub: connect, or pass --standin (the seven STS tasks from local files)"
    )


@pytest.mark.parametrize(
    ("flags", "said"), [(["--standin", "--task", "SciFact"], "hub"), (["--task", "STS99"], "'STSB'")]
)
def test_the_command_with_a_task_it_cannot_score_says_so_in_one_line(tmp_path, flags, said):
    from contrastlab.evaluation import bridge

    with pytest.raises(SystemExit) as stop:
        bridge.main([str(tmp_path / "model"), str(tmp_path / "senteval"), str(tmp_path / "out"), *flags])
    assert (
        str(stop.value).startswith("contrastlab: ")
        and said in str(stop.value)
        and "\n" not in str(stop.value)
    )
