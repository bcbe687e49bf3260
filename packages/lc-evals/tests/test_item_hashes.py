"""Pinned items: every built-in generator keeps producing the same bytes for a seed.

Results are resumed by item fingerprints, so a change that moves one character of a
generated item (its context, question, answers, or metadata and its order) invalidates
stored results. The hashes below were recorded from the generators and must not move.
"""

from __future__ import annotations

import hashlib
import json
import platform
from typing import Any

import pytest

import lc_evals

VARIANTS: dict[str, tuple[str, dict[str, Any]]] = {
    "niah_single": ("niah_single", {}),
    "niah_single/repeat": ("niah_single", {"haystack": "repeat", "depth": 0.3}),
    "niah_single/ruler": (
        "niah_single",
        {"haystack": "needles", "template": "ruler", "length_counts": "prompt", "reserve": 20},
    ),
    "niah_multikey": ("niah_multikey", {"key_kind": "uuid", "value_kind": "uuid"}),
    "niah_multikey/ruler": ("niah_multikey", {"template": "ruler", "haystack": "repeat"}),
    "niah_multivalue": ("niah_multivalue", {"value_kind": "word", "num_values": 3}),
    "niah_multiquery": ("niah_multiquery", {"template": "ruler", "length_counts": "prompt"}),
    "variable_tracking": ("variable_tracking", {}),
    "variable_tracking/ruler": (
        "variable_tracking",
        {"template": "ruler", "length_counts": "prompt", "reserve": 10, "num_chains": 2},
    ),
    "common_words": ("common_words", {}),
    "common_words/ruler": ("common_words", {"template": "ruler", "length_counts": "prompt"}),
    "frequent_words": ("frequent_words", {}),
    "frequent_words/ruler": ("frequent_words", {"template": "ruler", "reserve": 5,
                                                "length_counts": "prompt"}),
    "babilong_qa1": ("babilong_qa1", {}),
    "babilong_qa2": ("babilong_qa2", {}),
    "babilong_qa3": ("babilong_qa3", {}),
    "babilong_qa6": ("babilong_qa6", {}),
    "babilong_qa7": ("babilong_qa7", {"num_facts": 6}),
    "kv_retrieval": ("kv_retrieval", {}),
    "kv_retrieval/depth": ("kv_retrieval", {"depth": 0.8}),
    "minmax": ("minmax", {}),
    "minmax/min": ("minmax", {"op": "min", "low": -50, "high": 50}),
    "distractor_qa": ("distractor_qa", {}),
    "distractor_qa/ruler": ("distractor_qa", {"template": "ruler", "length_counts": "prompt"}),
    "icl_noisy_pool": ("icl_noisy_pool", {}),
}  # fmt: skip

PINNED: dict[str, str] = {
    "babilong_qa1": "ad11b29e22231cd07bbde9e57f481e257be50ff47c2e9a907169b880b9aee380",
    "babilong_qa2": "3b1647976d5f4ca4a9a40b08f555a9240124cf9f9e957c120f319f9f39cfe82c",
    "babilong_qa3": "a8d1dfc172f83f448f7bd34e9dc376c6e7138beb9e8c9254883f07ab54cea80d",
    "babilong_qa6": "31632f83b99dc7582112e7363183dec107b667b265ec920835991cad251c71d6",
    "babilong_qa7": "decfa4436b4883317c71df0070b220d92ca721d283b6a83e8d4c5b1c985472a4",
    "common_words": "e79690267a97bf1777466923f2ad55b30af5ad38b933bb12b2734cb723c198ec",
    "common_words/ruler": "90c31ac1de1aa848021ac7e4fbe80a59d25b3e34561dfb08a4385d1b908aead6",
    "distractor_qa": "1f3507ce139400d2b613ac19054dddf3667c8c2d995ac341d0a5621f8738543e",
    "distractor_qa/ruler": "c018617ff4b4be62d3cdf4adf42c7908b57370199dd508dc187a5f383aacf1ca",
    "frequent_words": "409e09b5548ac5014bff751151071dd10f01f473e7955488a6dd2dc3b24a55ef",
    "frequent_words/ruler": "11c6dc47547c7a4b64e6c2f2b4251d62cc3ba2c228a9598f242ae6bbedf6f585",
    "icl_noisy_pool": "596a0cf9a05e48bbe4340ab0531542edb80c170cabaff83a573dbe76a0213f66",
    "kv_retrieval": "1a75db6c44e1803cc92ae174d10797db97fe357787d810a41df31f5dcbc1faf4",
    "kv_retrieval/depth": "eae001e8db8b6db87ea6b7e4e5904b9d50115f2a59aebc88aa519183ccfec160",
    "minmax": "39dfe2888234e1910f53940af0c02aebfca48e3ca71fc37f1959f0c8803edf8c",
    "minmax/min": "3d42c1eabbc1bb046a7f577849232e15ebfe299858615727b45e221eb0db1028",
    "niah_multikey": "29f8335e1f8405925b705fe6f00d1111ccece36722abfa1d712f2ff835591d9e",
    "niah_multikey/ruler": "6dd39a1024b52b003885ebf20a4bfe20982f6583ff4dab5923031e0484bb778d",
    "niah_multiquery": "0cec029ec4869983eecb1ade17777d6e1d849b68d7369bd82895800162bf037b",
    "niah_multivalue": "8f11ad5367ae0bd54c8b608d11ef908899d6561fc8333d5151510ee7316ece2d",
    "niah_single": "f5f0c110782b677c19c0f299f4a7d38b0bb441ba7fed8cdc7a247abeee34833a",
    "niah_single/repeat": "d8683945a853dafb489c545a18a309a6d3f300a597761d1bfe8820194ed805ad",
    "niah_single/ruler": "f20c34548cc872b21b9807f67ef6277ffb58d57a2dd6904f93da294c409a5f6f",
    "variable_tracking": "947fca59cbe7bdd5dbbc12dd2951135a3a5d9e33d20743a965d69c4870b45ae8",
    "variable_tracking/ruler": "735959caaf0c5ea5ad3c902cd29eec1de3b2e32d1abe9c810666eae987b59add",
}

DOCQA = ["docqa_single", "docqa_reworded", "docqa_absent", "docqa_two_hop", "docqa_count"]
DOCQA_PYTHON = "3.11.7"
PINNED_DOCQA: dict[str, str] = {
    "docqa_single": "711eb25b74497de1038acd2071d22c8a4d5f993d3418c6424b7a501a73dabc56",
    "docqa_reworded": "e9280d127519c251abca643c53238696fb223e96ff244f7b8f2699aeaf4d74c8",
    "docqa_absent": "68384598abdb0e3916086ed7183f9bb613fb13f953d059c4e44854bb604c73fd",
    "docqa_two_hop": "559910d1f3ef010eed9ca88bea326f2775ecf7e6366a44251a9e3e79f38ef4df",
    "docqa_count": "1f84ba08a3b6639f8c80956a18660651113ee717585cb5f6cdb8312f77bd5629",
}

TOKENIZED = ["niah_single", "variable_tracking", "common_words", "babilong_qa2", "minmax"]
PINNED_TOKENIZED: dict[str, str] = {
    "niah_single": "4a017dde91114d8d3d6db969bc279d565f6bfb8ed113d393f59f3263ecbdc78d",
    "variable_tracking": "af5caa5bf9b69549a3c8287be67c285b399d17bf4b5426c916f1c33553331e84",
    "common_words": "81ed110cfeccaf670123f0ed14ccd47941743a33caad32637009c3dd05ab3c08",
    "babilong_qa2": "2c85c19f9048dcc88b96e72c85570566a2653f64b5aa0d5f6ef2e141445117b8",
    "minmax": "472fa9d2a905350bd4ddc7cc4a9a5b668dd7697550fc046c5d8d63afce8af36d",
}


def items_hash(items: list[lc_evals.TaskItem]) -> str:
    """SHA-256 of the items serialized in order, metadata in its own key order."""
    rows = [[i.id, i.task, i.context, i.question, list(i.answers), i.metadata] for i in items]
    return hashlib.sha256(json.dumps(rows, default=str).encode()).hexdigest()


@pytest.mark.parametrize("variant", sorted(VARIANTS))
def test_generated_items_are_pinned(variant) -> None:
    task, options = VARIANTS[variant]
    items = lc_evals.generate(task, n=2, length=2600, seed=7, **options)
    assert items_hash(items) == PINNED[variant]


@pytest.mark.parametrize("task", TOKENIZED)
def test_generated_items_are_pinned_with_a_tokenizer(tokenizer, task) -> None:
    items = lc_evals.generate(task, n=1, length=1200, seed=3, tokenizer=tokenizer)
    assert items_hash(items) == PINNED_TOKENIZED[task]


@pytest.mark.skipif(
    platform.python_version() != DOCQA_PYTHON,
    reason="docqa reads this Python's own documentation text",
)
@pytest.mark.parametrize("task", DOCQA)
def test_docqa_items_are_pinned(task) -> None:
    items = lc_evals.generate(task, n=2, length=3000, seed=5)
    assert items_hash(items) == PINNED_DOCQA[task]
