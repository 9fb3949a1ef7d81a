"""Fingerprints: exact encoding, sensitivity to every passage field, stability across processes."""

import math
import subprocess
import sys

import numpy as np
import pytest

from ragray.cache.codec import (
    decode_hits,
    decode_passage,
    dumps,
    encode_hits,
    encode_passage,
    loads,
)
from ragray.cache.fingerprint import (
    Fingerprint,
    Uncacheable,
    canonical,
    code_fingerprint,
    decode_value,
    encode_value,
    library_versions,
    passages_fingerprint,
)
from ragray.cache.keys import chunking_identity, rerank_identity
from ragray.config import ChunkingConfig, RerankConfig
from ragray.types import Hit, Passage

BASE = Passage("p1", "Some text.", title="T", meta={"source": "x", "page_starts": (0, 12)})


def test_encoding_round_trips_tuples_lists_and_dicts_exactly():
    value = {"a": (1, [2.5, None], {"b": True}), "t": ["x", ("y",)], "d": {"t": [1]}}
    back = decode_value(loads(dumps(encode_value(value))))
    assert back == value
    assert type(back["a"]) is tuple and type(back["t"][1]) is tuple
    assert back["d"] == {"t": [1]}  # a user's dict shaped like a tag stays a dict


@pytest.mark.parametrize(
    "bad, match",
    [(np.float64(1.0), "float64"), ({1, 2}, "set"), ({1: "x"}, "mapping key 1"), (b"raw", "bytes")],
)
def test_values_without_exact_json_form_are_refused(bad, match):
    with pytest.raises(Uncacheable, match=match):
        canonical({"v": bad})


def test_canonical_ignores_dict_order_but_not_list_order():
    assert canonical({"a": 1, "b": 2}) == canonical({"b": 2, "a": 1})
    assert canonical([1, 2]) != canonical([2, 1])
    assert canonical((1, 2)) != canonical([1, 2])


def test_fingerprint_parts_are_length_prefixed():
    one = Fingerprint("k").update("x", "ab").update("y", "c").hexdigest()
    two = Fingerprint("k").update("x", "a").update("y", "bc").hexdigest()
    assert one != two
    assert Fingerprint("k").hexdigest() != Fingerprint("other").hexdigest()


@pytest.mark.parametrize(
    "changed",
    [
        Passage("p2", "Some text.", title="T", meta=BASE.meta),
        Passage("p1", "Some text!", title="T", meta=BASE.meta),
        Passage("p1", "Some text.", title="U", meta=BASE.meta),
        Passage("p1", "Some text.", title="T", doc_id="d", meta=BASE.meta),
        Passage("p1", "Some text.", title="T", position=1, meta=BASE.meta),
        Passage("p1", "Some text.", title="T", meta={"source": "y", "page_starts": (0, 12)}),
        Passage("p1", "Some text.", title="T", meta={"source": "x", "page_starts": [0, 12]}),
    ],
)
def test_every_passage_field_changes_the_fingerprint(changed):
    assert passages_fingerprint([BASE]) != passages_fingerprint([changed])


def test_passage_order_and_count_matter():
    a, b = Passage("a", "x"), Passage("b", "y")
    assert passages_fingerprint([a, b]) != passages_fingerprint([b, a])
    assert passages_fingerprint([a]) != passages_fingerprint([a, a])
    assert passages_fingerprint([]) == passages_fingerprint(())


def test_odd_meta_makes_passages_uncacheable():
    with pytest.raises(Uncacheable):
        passages_fingerprint([Passage("a", "x", meta={"arr": np.arange(3)})])


def test_fingerprints_are_stable_across_processes_and_hash_seeds():
    code = (
        "from ragray.cache.fingerprint import passages_fingerprint, canonical\n"
        "from ragray.types import Passage\n"
        "print(passages_fingerprint([Passage('p1', 'Some text.', title='T', "
        "meta={'source': 'x', 'page_starts': (0, 12)})]), canonical({'b': 1, 'a': 2}))"
    )
    outs = {
        subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                       env={"PYTHONHASHSEED": seed, "PATH": ""}).stdout
        for seed in ("1", "2")
    }
    assert outs == {f"{passages_fingerprint([BASE])} {canonical({'a': 2, 'b': 1})}\n"}


def test_passage_and_hit_codec_round_trip_exactly():
    odd = Passage("q", "lone \ud800 surrogate\nand newline", meta={"n": -0.0, "inf": math.inf})
    hits = (Hit(BASE, 1, 0.1 + 0.2), Hit(odd, 2, -1e-320))
    back = decode_hits(loads(dumps(encode_hits(hits))))
    assert back == hits
    assert [h.score for h in back] == [0.1 + 0.2, -1e-320]  # bit-exact floats
    assert type(back[0].passage.meta["page_starts"]) is tuple
    assert dict(back[1].passage.meta) == {"n": -0.0, "inf": math.inf}
    with pytest.raises(ValueError, match="malformed passage"):
        decode_passage(["id", 3, "", "id", 0, {"d": {}}])
    assert decode_passage(encode_passage(BASE)) == BASE


def test_chunking_identity_ignores_size_only_when_passages_are_kept_whole():
    small, big = ChunkingConfig(size=50), ChunkingConfig(size=200)
    assert chunking_identity(small, documents=False) == chunking_identity(big, documents=False)
    assert chunking_identity(small, documents=True) != chunking_identity(big, documents=True)
    assert chunking_identity(small, documents=True)["method"] == "words"


def test_rerank_identity_leaves_out_batch_size_and_device():
    a = RerankConfig(strategy="bi_encoder", model="minilm", batch_size=8, device="cpu")
    b = RerankConfig(strategy="bi_encoder", model="minilm", batch_size=64, device="auto")
    assert rerank_identity(a) == rerank_identity(b)
    assert rerank_identity(a) != rerank_identity(a.model_copy(update={"candidates": 5}))
    assert rerank_identity(RerankConfig(candidates=3)) == rerank_identity(RerankConfig(candidates=9))


def test_library_versions_and_code_fingerprint():
    import scipy

    versions = library_versions("numpy", ("scipy-alt-xyz", "scipy"), "no-such-dist-xyz")
    assert versions == {"numpy": np.__version__, "scipy-alt-xyz": f"scipy=={scipy.__version__}",
                        "no-such-dist-xyz": None}
    assert len(code_fingerprint()) == 64 and code_fingerprint() == code_fingerprint()
