"""Built-in task generators and their registration."""

from __future__ import annotations

from lc_evals.registry import register_task


def register_builtin_tasks() -> None:
    """Register every built-in task (called once, lazily, by the registry)."""
    from lc_evals.icl import pool as icl_pool
    from lc_evals.tasks import babilong, chunking, distractor_qa, docqa, niah, ruler

    builtins = [
        ("niah_single", niah.niah_single, "contains_all", "RULER NIAH, one needle"),
        (
            "niah_multikey",
            niah.niah_multikey,
            "contains_all",
            "RULER NIAH, target among distractor keys",
        ),
        (
            "niah_multivalue",
            niah.niah_multivalue,
            "contains_all",
            "RULER NIAH, several values for one key",
        ),
        (
            "niah_multiquery",
            niah.niah_multiquery,
            "contains_all",
            "RULER NIAH, several keys asked at once",
        ),
        (
            "variable_tracking",
            ruler.variable_tracking,
            "contains_all",
            "RULER variable tracking (chains, hops)",
        ),
        ("common_words", ruler.common_words, "contains_all", "RULER common-words extraction"),
        (
            "frequent_words",
            ruler.frequent_words,
            "contains_all",
            "RULER frequent-words extraction (Zipf)",
        ),
        (
            "babilong_qa1",
            babilong.babilong_qa1,
            "contains_any",
            "bAbI-like single supporting fact in long text",
        ),
        (
            "babilong_qa2",
            babilong.babilong_qa2,
            "contains_any",
            "bAbI-like two supporting facts in long text",
        ),
        (
            "babilong_qa3",
            babilong.babilong_qa3,
            "contains_any",
            "bAbI-like three supporting facts in long text",
        ),
        (
            "babilong_qa6",
            babilong.babilong_qa6,
            "exact_match",
            "bAbI-like yes/no question in long text",
        ),
        ("babilong_qa7", babilong.babilong_qa7, "exact_match", "bAbI-like counting in long text"),
        ("kv_retrieval", chunking.kv_retrieval, "contains_all", "UUID key-value retrieval"),
        (
            "minmax",
            chunking.minmax,
            "exact_match",
            "largest/smallest number spread through the context",
        ),
        (
            "distractor_qa",
            distractor_qa.distractor_qa,
            "contains_all",
            "QA with the gold passage among near-miss distractors",
        ),
        ("docqa_single", docqa.docqa_single, "docqa", "QA over Python's docs, one fact"),
        (
            "docqa_reworded",
            docqa.docqa_reworded,
            "docqa",
            "QA over Python's docs, question shares no content word with the fact",
        ),
        (
            "docqa_absent",
            docqa.docqa_absent,
            "docqa",
            "QA over Python's docs about an entity it never names (abstain)",
        ),
        (
            "docqa_two_hop",
            docqa.docqa_two_hop,
            "docqa",
            "QA over Python's docs joining two facts far apart",
        ),
        (
            "docqa_count",
            docqa.docqa_count,
            "docqa",
            "QA over Python's docs counting or adding events spread through it",
        ),
        (
            "icl_noisy_pool",
            icl_pool.icl_noisy_pool,
            "exact_match",
            "ICL classification with a noisy, partly misaligned example pool",
        ),
    ]
    for name, fn, scorer, description in builtins:
        register_task(name, fn, scorer=scorer, description=description, replace=True)
