"""docqa: the documentation haystack, planted facts, the paraphrase bank, abstention,
scoring, lengths, determinism and bad input."""

from __future__ import annotations

import contextlib
import doctest
import io
import pathlib
import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import lc_evals
from lc_evals.tasks import docqa as D

TASKS = [f"docqa_{k}" for k in D.KINDS]
GUIDE = pathlib.Path(__file__).resolve().parents[3] / "docs" / "packages" / "lc-evals.md"


def corpus_text() -> str:
    return "\n\n".join(p.text for p in D.doc_paragraphs())


def names_in(text: str, name: str) -> bool:
    """Whether any word of ``name`` occurs in ``text`` as a whole word (any case)."""
    return any(re.search(rf"\b{re.escape(w)}\b", text, re.I) for w in name.split())


def sentence_before(context: str, offset: int) -> str:
    """The text just before ``offset``, without the separating whitespace."""
    return context[:offset].rstrip()


def template_regex(template: str, **fixed: str) -> re.Pattern[str]:
    """A regex of a count template with ``fixed`` slots filled and ``day``/``qty`` free."""
    out = ""
    for part in re.split(r"(\{\w+\})", template):
        if part == "{day}":
            out += r"(?P<day>[A-Z]\w+)"
        elif part == "{qty}":
            out += r"(?P<qty>\d+)"
        elif part.startswith("{"):
            out += re.escape(fixed[part[1:-1]])
        else:
            out += re.escape(part)
    return re.compile(out)


# --- registration and module examples ---------------------------------------------------


def test_every_kind_is_registered_with_the_docqa_scorer() -> None:
    assert set(TASKS) <= set(lc_evals.available_tasks())
    for task in TASKS:
        assert lc_evals.task_spec(task).scorer == "docqa"
    assert lc_evals.get_scorer("docqa") is D.docqa_match


def test_module_examples_hold() -> None:
    failures, tried = doctest.testmod(D, optionflags=doctest.ELLIPSIS)
    assert tried >= 15
    assert failures == 0


# --- the haystack ---------------------------------------------------------------------


def test_haystack_is_pythons_documentation_each_block_once() -> None:
    from pydoc_data.topics import topics

    paragraphs = D.doc_paragraphs()
    source = " ".join("\n\n".join(topics[k] for k in sorted(topics)).split())
    for p in paragraphs[::25]:
        assert " ".join(p.text.split()) in source
    keys = [" ".join(p.text.split()) for p in paragraphs]
    assert len(set(keys)) == len(keys)
    prose = [p for p in paragraphs if p.prose]
    assert len(prose) > 500
    # about 250K characters are needed for 64K tokens of a Llama-style tokenizer
    assert len(corpus_text()) >= 300_000
    # prose sentences end a sentence; a non-prose block is one verbatim unit
    assert all(p.sentences[-1][-1] in ".:?!)" for p in prose)
    assert all(len(p.sentences) == 1 for p in paragraphs if not p.prose)


def test_split_sentences_keeps_abbreviations_and_sentence_ends() -> None:
    text = 'Use a list, e.g. "x". It works. Then "y" follows! Why? Because (see above).'
    assert D.split_sentences(text) == [
        'Use a list, e.g. "x".',
        "It works.",
        'Then "y" follows!',
        "Why?",
        "Because (see above).",
    ]


def test_invented_words_never_occur_in_the_documentation() -> None:
    text = corpus_text()
    invented = [*D.FIRST_NAMES, *D.SURNAMES, *D.TOWNS, *D.PET_NAMES]
    found = [w for w in invented if names_in(text, w)]
    assert found == []


def test_seeds_and_items_take_different_windows_starting_at_their_paragraph() -> None:
    starts = []
    for seed in range(12):
        (item,) = lc_evals.generate("docqa_single", n=1, length=2000, seed=seed, depth=0.5)
        start = item.metadata["start_paragraph"]
        paragraph = D.doc_paragraphs()[start]
        assert paragraph.prose
        # the window opens with that paragraph (after facts placed at the very start)
        planted = [*item.metadata["facts"], *item.metadata["distractors"]]
        assert 0 <= item.context.index(paragraph.sentences[0]) <= sum(len(t) + 2 for t in planted)
        assert item.metadata["start_topic"] == paragraph.topic
        starts.append(start)
    assert len(set(starts)) >= 11  # seeded: a collision is possible, not likely
    # the items of one seed never share a start
    items = lc_evals.generate("docqa_absent", n=40, length=1500, seed=0, distractors=1)
    assert len({i.metadata["start_paragraph"] for i in items}) == 40


def test_a_long_window_wraps_round_without_repeating_a_block() -> None:
    (item,) = lc_evals.generate("docqa_count", n=1, length=300_000, seed=5)
    meta = item.metadata
    paragraphs = D.doc_paragraphs()
    assert meta["start_paragraph"] > 0
    assert meta["paragraphs"] > len(paragraphs) - meta["start_paragraph"]  # it wrapped
    assert paragraphs[0].text in item.context  # the first topic follows the last one
    blocks = item.context.split("\n\n")
    assert len(set(blocks)) == len(blocks)
    assert 0.99 * 300_000 <= len(item.context) <= 300_000


def test_a_length_beyond_the_documentation_is_refused() -> None:
    with pytest.raises(ValueError, match="longer than the documentation"):
        lc_evals.generate("docqa_single", n=1, length=2_000_000, seed=0)


# --- lengths --------------------------------------------------------------------------


@pytest.mark.parametrize("task", TASKS)
@pytest.mark.parametrize("length", [4096, 16384])
def test_length_in_tokens_within_one_percent(tokenizer, task, length) -> None:
    (item,) = lc_evals.generate(task, n=1, length=length, seed=7, tokenizer=tokenizer)
    measured = len(tokenizer.encode(item.context))
    assert measured == item.metadata["length"]
    assert item.metadata["length_unit"] == "tokens"
    assert 0.99 * length <= measured <= length


def test_64k_tokens_fit_in_the_documentation(tokenizer) -> None:
    (item,) = lc_evals.generate("docqa_two_hop", n=1, length=65536, seed=0, tokenizer=tokenizer)
    measured = len(tokenizer.encode(item.context))
    assert 0.99 * 65536 <= measured <= 65536
    hop1, hop2 = item.metadata["fact_offsets"]
    assert abs(hop2 - hop1) >= 0.4 * len(item.context)


# --- determinism ----------------------------------------------------------------------


@pytest.mark.parametrize("task", TASKS)
def test_same_arguments_same_items_and_item_i_independent_of_n(task, seeded_items) -> None:
    a = seeded_items(task, 3000)
    assert a[0] != a[1]


@pytest.mark.parametrize("task", TASKS)
def test_facts_do_not_depend_on_the_length(task) -> None:
    (short,) = lc_evals.generate(task, n=1, length=3000, seed=4)
    (long,) = lc_evals.generate(task, n=1, length=12000, seed=4)
    assert (short.question, short.answers) == (long.question, long.answers)
    assert short.metadata["facts"] == long.metadata["facts"]
    assert short.metadata["distractors"] == long.metadata["distractors"]
    assert short.metadata["start_paragraph"] == long.metadata["start_paragraph"]


# --- planted facts --------------------------------------------------------------------


def check_plants(item: lc_evals.TaskItem) -> None:
    """Every planted sentence sits once, at its recorded offset, at a sentence boundary."""
    meta, context = item.metadata, item.context
    planted = [*meta["facts"], *meta["distractors"]]
    offsets = [*meta["fact_offsets"], *meta["distractor_offsets"]]
    assert len(set(planted)) == len(planted)
    for text, offset in zip(planted, offsets, strict=True):
        assert context.count(text) == 1, text
        assert context[offset : offset + len(text)] == text
        before = sentence_before(context, offset)
        assert offset == 0 or before[-1] in '.!?)"”*' or context[:offset].endswith("\n\n")
        after = context[offset + len(text) :]
        assert after == "" or after[0] in " \n"


@pytest.mark.parametrize("task", TASKS)
def test_planted_sentences_appear_once_at_their_offsets(task) -> None:
    for item in lc_evals.generate(task, n=4, length=6000, seed=2, distractors=4):
        check_plants(item)
        assert len(item.metadata["distractors"]) == 4
        assert item.metadata["kind"] == task.removeprefix("docqa_")


def test_single_question_asks_the_fact_directly_among_same_family_distractors() -> None:
    for item in lc_evals.generate("docqa_single", n=6, length=4000, seed=0):
        meta = item.metadata
        (fact,) = meta["facts"]
        asked = meta["asked_entity"]
        assert asked in item.question
        assert asked in fact
        assert item.answers[0] in fact
        shared = D.content_words(item.question) & D.content_words(fact)
        assert shared - D.content_words(asked)  # more in common than the name
        family = next(f for f in D.FACT_FAMILIES if f.name == meta["family"])
        pattern = re.escape(family.fact).replace(r"\{who\}", ".+").replace(r"\{answer\}", ".+")
        assert all(re.fullmatch(pattern, d) for d in meta["distractors"])
        assert not any(asked in d for d in meta["distractors"])
        assert not any(item.answers[0] in d for d in meta["distractors"])


def test_depth_places_the_fact_where_asked() -> None:
    for depth in (0.0, 0.3, 0.8, 1.0):
        (item,) = lc_evals.generate(
            "docqa_single", n=1, length=20000, seed=1, depth=depth, distractors=0
        )
        (offset,) = item.metadata["fact_offsets"]
        assert item.metadata["depth"] == depth
        # facts never go inside, before or after a code block or table, so the
        # nearest allowed boundary can be up to the longest such block away
        block = max(len(b) for b in item.context.split("\n\n"))
        assert abs(offset - depth * len(item.context)) <= block + 300
        if depth == 0.0:
            assert offset == 0
        if depth == 1.0:
            assert offset > 0.9 * len(item.context)


def test_absent_entity_is_named_nowhere_and_the_answer_is_abstention() -> None:
    for item in lc_evals.generate("docqa_absent", n=8, length=5000, seed=3):
        meta = item.metadata
        asked = meta["asked_entity"]
        assert meta["answerable"] is False
        assert item.answers == (D.ABSTAIN_ANSWER,)
        assert meta["facts"] == []
        assert asked in item.question
        assert not names_in(item.context, asked)  # neither first name nor surname
        family = next(f for f in D.FACT_FAMILIES if f.name == meta["family"])
        assert family.fact_text(asked, "X").split("X")[0] not in item.context
        # the same family is there, about other people
        stem = family.fact.split("{answer}")[0].split("{who}")[-1]
        assert item.context.count(stem) >= len(meta["distractors"]) >= 1


def test_reworded_bank_shares_no_content_word_between_question_and_any_fact() -> None:
    assert len(D.REWORDED_BANK) >= 40
    assert len({t.name for t in D.REWORDED_BANK}) == len(D.REWORDED_BANK)
    name_words = D.content_words(" ".join([*D.FIRST_NAMES, *D.SURNAMES]))
    bad = []
    for t in D.REWORDED_BANK:
        for qi in range(len(t.pairs)):
            question = D.content_words(t.question_text(qi))
            assert question, t.name
            if question & name_words:
                bad.append((t.name, qi, "name", question & name_words))
            # not with its own fact, nor with any distractor fact of the template
            for fi in range(len(t.pairs)):
                for answer in t.answers:
                    fact = D.content_words(t.fact_text("Mara Quell", fi, answer))
                    if question & fact:
                        bad.append((t.name, qi, fi, question & fact))
    assert bad == []


def test_content_words_rules() -> None:
    cw = D.content_words
    assert cw("The Keys") == cw("key") == {"key"}
    assert cw("at on of it is a") == frozenset()
    assert cw("Where is the glass kept?") == {"glass", "kept"}
    assert cw("Orlen's workshops") == {"orlen", "workshop"}
    # a paraphrase pair that does share a word is caught
    assert cw("the spare key") & cw("which keys are spare?")


def test_reworded_items_share_no_content_word_with_their_fact() -> None:
    for item in lc_evals.generate("docqa_reworded", n=10, length=3000, seed=9):
        (fact,) = item.metadata["facts"]
        assert D.content_words(item.question) & D.content_words(fact) == frozenset()
        assert item.answers[0] in fact
        assert item.metadata["question_word"] in item.question
        assert item.metadata["fact_word"] in fact
        for d in item.metadata["distractors"]:
            assert D.content_words(item.question) & D.content_words(d) == frozenset()


def test_two_hop_facts_are_far_apart_and_answer_only_together() -> None:
    for item in lc_evals.generate("docqa_two_hop", n=8, length=8000, seed=5, distractors=5):
        meta = item.metadata
        hop1, hop2 = meta["facts"]
        off1, off2 = meta["fact_offsets"]
        asked, bridge, answer = meta["asked_entity"], meta["bridge_entity"], item.answers[0]
        assert abs(off2 - off1) >= D.MIN_HOP_SEPARATION * len(item.context)
        assert hop1 == D.relation_text(asked, meta["relation"], bridge)
        assert not names_in(hop2, asked)
        assert answer not in hop1
        assert bridge in hop2
        assert answer in hop2
        assert asked in item.question
        assert bridge not in item.question
        # no sentence of the context names the asked person and the answer together
        sentences = re.split(r"(?<=[.!?])\s+", item.context)
        assert not any(asked in s and answer in s for s in sentences)
        assert item.context.count(answer) == 1
        # distractors: the asked person's other relation, the asked relation of others,
        # and the asked family about other people
        relation = f"'s {meta['relation']} is "
        assert sum(relation in d for d in meta["distractors"]) == 1
        assert sum(d.startswith(asked) for d in meta["distractors"]) == 2


def test_count_answer_is_what_the_context_says() -> None:
    for item in lc_evals.generate("docqa_count", n=10, length=6000, seed=1):
        meta = item.metadata
        family = next(f for f in D.COUNT_FAMILIES if f.name == meta["family"])
        k1, k2 = meta["asked_keys"]
        mode = meta["mode"]
        template = family.count_fact if mode == "count" else family.total_fact
        found = list(template_regex(template, k1=k1, k2=k2).finditer(item.context))
        assert len(found) == meta["count"] == len(meta["facts"])
        assert 2 <= len(found) <= 5
        days = [m["day"] for m in found]
        assert len(set(days)) == len(days)
        truth = len(found) if mode == "count" else sum(int(m["qty"]) for m in found)
        assert item.answers[0] == str(truth) == str(meta["total"])
        assert D.number_words(truth) in item.answers
        # near misses share the goods/person or the town, never both
        for d in meta["distractors"]:
            assert not template_regex(template, k1=k1, k2=k2).search(d)
            assert (k1 in d) + (k2 in d) <= 1


@pytest.mark.parametrize("mode", ["count", "total"])
@pytest.mark.parametrize("facts", [2, 5])
def test_count_options_fix_the_number_and_mode(mode, facts) -> None:
    (item,) = lc_evals.generate("docqa_count", n=1, length=5000, seed=0, facts=facts, mode=mode)
    assert item.metadata["count"] == facts
    assert item.metadata["mode"] == mode
    total = facts if mode == "count" else sum(item.metadata["quantities"])
    assert item.answers[0] == str(total)
    if mode == "total":
        assert "in total" in item.question


def test_count_facts_are_spread_over_the_document() -> None:
    (item,) = lc_evals.generate("docqa_count", n=1, length=20000, seed=3, facts=4)
    positions = sorted(item.metadata["fact_positions"])
    assert [int(p * 4) for p in positions] == [0, 1, 2, 3]  # one in each quarter


# --- scoring --------------------------------------------------------------------------

ABSTENTIONS = [
    "not found in the document",
    "Not found in the document.",
    "The document does not say.",
    "The document doesn't mention it.",
    "Unknown",
    "UNKNOWN.",
    "It is not mentioned.",
    "There is no information about that person.",
    "The text does not contain this information.",
    "I don't know.",
    "This cannot be determined from the document.",
    "None",
    "The answer is: not stated in the text.",
]
ANSWERS = ["Vessby", "It is Vessby.", "the answer is vessby", "Mara keeps it in Vessby"]


@pytest.mark.parametrize("prediction", ABSTENTIONS)
def test_abstention_phrases_are_recognized(prediction) -> None:
    assert D.score_abstention(prediction)
    assert D.docqa_match(prediction, [D.ABSTAIN_ANSWER]) == 1.0
    assert D.docqa_match(prediction, ["Vessby"]) == 0.0


@pytest.mark.parametrize("prediction", ANSWERS)
def test_answers_are_not_abstentions(prediction) -> None:
    assert not D.score_abstention(prediction)
    assert D.docqa_match(prediction, ["Vessby"]) == 1.0
    assert D.docqa_match(prediction, [D.ABSTAIN_ANSWER]) == 0.0


def test_answer_match_is_whole_word_and_ignores_case_and_articles() -> None:
    assert D.docqa_match("THE LUGGAGE RACK", ["luggage rack"]) == 1.0
    assert D.docqa_match("on the luggage-rack", ["luggage rack"]) == 0.0
    assert D.docqa_match("Vessbyton", ["Vessby"]) == 0.0
    assert D.docqa_match("17 crates", ["7", "seven"]) == 0.0
    assert D.docqa_match("seven crates", ["7", "seven"]) == 1.0
    assert D.docqa_match("Twenty-three.", D.number_answers(23)) == 1.0
    assert D.docqa_match("twenty three", D.number_answers(23)) == 1.0
    assert D.docqa_match("The answer is 23.", D.number_answers(23)) == 1.0
    assert D.docqa_match("The answer is 32.", D.number_answers(23)) == 0.0
    with pytest.raises(ValueError, match="answers"):
        D.docqa_match("x", [])


def test_score_docqa_on_every_kind() -> None:
    for task in TASKS:
        for item in lc_evals.generate(task, n=3, length=3000, seed=6):
            answerable = item.metadata["answerable"]
            assert D.score_docqa(item, item.answers[0])
            assert D.score_docqa(item, "Not mentioned in the document.") is (not answerable)
            wrong = item.metadata.get("distractor_answers") or ["Glimmerton Zeta"]
            if task == "docqa_count":
                wrong = [str(int(item.answers[0]) + 1)]
            assert not D.score_docqa(item, wrong[0])
            # an answer that also abstains is wrong (an abstention is right where due)
            hedged = f"{item.answers[0]}? The document does not say."
            assert D.score_docqa(item, hedged) is (not answerable)
            expected = float(D.score_docqa(item, item.answers[0]))
            assert lc_evals.score(item, item.answers[0]) == expected == 1.0


def test_harness_runs_docqa_suites_with_the_default_scorer() -> None:
    suite = lc_evals.make_suite(TASKS, lengths=[3000], n=2, seed=0)
    oracle = lc_evals.run(lambda item: item.answers[0], suite)
    assert [r.score for r in oracle] == [1.0] * len(suite)
    abstain = lc_evals.run(lambda item: "Unknown.", suite)
    assert {r.task for r in abstain if r.score == 1.0} == {"docqa_absent"}
    assert all(r.scorer == "docqa" for r in abstain)
    prompt = lc_evals.render_prompt(suite[0], lc_evals.DOCQA_TEMPLATE)
    assert prompt.startswith(suite[0].context)
    assert prompt.endswith(suite[0].question)
    assert D.ABSTAIN_ANSWER in prompt


# --- property test over seeds ---------------------------------------------------------


@settings(max_examples=25, deadline=None)
@given(
    task=st.sampled_from(TASKS),
    length=st.integers(2500, 30000),
    seed=st.integers(0, 10**9),
    distractors=st.integers(1, D.MAX_DISTRACTORS),
)
def test_items_hold_their_invariants_for_any_seed(task, length, seed, distractors) -> None:
    (item,) = lc_evals.generate(task, n=1, length=length, seed=seed, distractors=distractors)
    meta = item.metadata
    assert 0.99 * length <= len(item.context) == meta["length"] <= length
    check_plants(item)
    assert meta["seed"] == seed
    assert meta["target_length"] == length
    assert lc_evals.score(item, item.answers[0]) == 1.0
    assert lc_evals.score(item, "no information") == float(not meta["answerable"])
    if task == "docqa_absent":
        assert not names_in(item.context, meta["asked_entity"])
    if task == "docqa_two_hop":
        off1, off2 = meta["fact_offsets"]
        assert abs(off2 - off1) >= 0.4 * len(item.context)
    if task == "docqa_reworded":
        fact = meta["facts"][0]
        assert D.content_words(item.question) & D.content_words(fact) == frozenset()


# --- bad input ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"kind": "triple_hop"}, "kind must be one of"),
        ({"distractors": 6}, r"distractors must be an integer in \[0, 5\]"),
        ({"distractors": -1}, "distractors"),
        ({"distractors": True}, "distractors"),
        ({"kind": "absent", "distractors": 0}, "distractors must be >= 1 for kind 'absent'"),
        ({"kind": "count", "depth": 0.5}, "depth applies to kinds"),
        ({"kind": "single", "depth": 1.5}, r"depth must be a float in \[0, 1\]"),
        ({"kind": "count", "facts": 6}, r"facts must be an integer in \[2, 5\]"),
        ({"kind": "single", "facts": 3}, "facts applies to kind 'count'"),
        ({"kind": "count", "mode": "sum"}, "mode must be one of"),
        ({"kind": "two_hop", "mode": "count"}, "mode applies to kind 'count'"),
    ],
)
def test_bad_config_is_refused(kwargs, match) -> None:
    with pytest.raises(ValueError, match=match):
        D.DocQAConfig(**kwargs)
    with pytest.raises(ValueError, match=match):
        D.docqa(1, 3000, 0, **kwargs)


def test_bad_generate_arguments_are_refused() -> None:
    with pytest.raises(ValueError, match="n must be a positive integer"):
        D.docqa(0, 3000, 0)
    with pytest.raises(ValueError, match="n must be a positive integer"):
        lc_evals.generate("docqa_single", n=0, length=3000, seed=0)
    with pytest.raises(ValueError, match="unknown task 'docqa_triple'"):
        lc_evals.generate("docqa_triple", n=1, length=3000, seed=0)
    with pytest.raises(ValueError, match="unknown option"):
        lc_evals.generate("docqa_count", n=1, length=3000, seed=0, depth=0.5)
    with pytest.raises(ValueError, match="length must be a positive integer"):
        D.docqa(1, 0, 0)
    with pytest.raises(ValueError, match="seed must be an integer"):
        D.docqa(1, 3000, 1.5)  # type: ignore[arg-type]


@pytest.mark.parametrize("task", TASKS)
def test_a_length_too_small_for_the_facts_is_refused(task) -> None:
    with pytest.raises(ValueError, match="impossible length"):
        lc_evals.generate(task, n=1, length=120, seed=0)


def test_two_hop_refuses_a_length_that_cannot_separate_the_hops() -> None:
    (item,) = lc_evals.generate("docqa_two_hop", n=1, length=5000, seed=0, distractors=5)
    planted = sum(len(t) + 1 for t in [*item.metadata["facts"], *item.metadata["distractors"]])
    # room for the facts and about one sentence of prose: the hops cannot be 40% apart
    with pytest.raises(ValueError, match=r"impossible length.*(apart|prose)"):
        lc_evals.generate("docqa_two_hop", n=1, length=planted + 60, seed=0, distractors=5)


# --- the guide ------------------------------------------------------------------------


@pytest.mark.skipif(not GUIDE.exists(), reason="the docs tree is not beside this checkout")
def test_guide_docqa_example() -> None:
    text = GUIDE.read_text()
    section = text[text.index("## Document QA over real prose") :]
    section = section[: section.index("\n## ", 1)]
    code = re.findall(r"```python\n(.*?)```", section, re.S)[0]
    expected = re.findall(r"```text\n(.*?)```", section, re.S)[0]
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(compile(code, str(GUIDE), "exec"), {})
    assert out.getvalue() == expected
