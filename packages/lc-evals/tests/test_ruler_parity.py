"""RULER parity: prompts worded as RULER words them, one-shot VT/CWE examples, and a
target length that counts the whole prompt.

The template strings below are RULER's definition of its tasks, copied from NVIDIA/RULER
``scripts/data/synthetic/constants.py`` (commit c3f5e3b, ``TASKS``), and its rules for
one-answer NIAH wording, multi-key queries and QA documents from ``niah.py`` and
``qa.py`` there. The expected prompts are built from them here, independently of
lc-evals' own copy.
"""

from __future__ import annotations

import json
import re
from collections import Counter

import pytest

import lc_evals
import lc_evals.haystack
from lc_evals import render_prompt

NIAH = (
    "Some special magic {type_needle_v} are hidden within the following text. Make sure to "
    "memorize it. I will quiz you about the {type_needle_v} afterwards.\n{context}\nWhat are "
    "all the special magic {type_needle_v} for {query} mentioned in the provided text?"
)
NIAH_PREFIX = " The special magic {type_needle_v} for {query} mentioned in the provided text are"
VT = (
    "Memorize and track the chain(s) of variable assignment hidden in the following text.\n\n"
    "{context}\nQuestion: Find all variables that are assigned the value {query} in the text "
    "above."
)
VT_PREFIX = (
    " Answer: According to the chain(s) of variable assignment in the text above, {num_v} "
    "variables are assigned the value {query}, they are: "
)
CWE = (
    "Below is a numbered list of words. In these words, some appear more often than others. "
    "Memorize the ones that appear most often.\n{context}\nQuestion: What are the 10 most "
    "common words in the above list?"
)
CWE_PREFIX = " Answer: The top 10 words that appear most often in the list are:"
FWE = (
    "Read the following coded text and track the frequency of each coded word. Find the three "
    "most frequently appeared coded words. {context}\nQuestion: Do not provide any "
    "explanation. Please ignore the dots '....'. What are the three most frequently appeared "
    "words in the above coded text?"
)
FWE_PREFIX = (
    " Answer: According to the coded text above, the three most frequently appeared words are:"
)
QA = (
    "Answer the question based on the given documents. Only give me the answer and do not "
    "output any other words.\n\nThe following are given documents.\n\n{context}\n\nAnswer the "
    "question based on the given documents. Only give me the answer and do not output any "
    "other words.\n\nQuestion: {query}"
)
QA_PREFIX = " Answer:"

NIAH_CONFIGS = [n for n in lc_evals.RULER_CONFIGS if n.startswith("niah")]


def _ruler_niah(item: lc_evals.TaskItem, type_needle_v: str) -> str:
    """RULER's NIAH input for ``item``: its rules applied to its template."""
    template = NIAH + NIAH_PREFIX
    if len(item.answers) == 1:  # RULER: num_needle_q * num_needle_v == 1
        for old, new in (("Some", "A"), ("are all", "is"), ("are", "is"), ("answers", "answer")):
            template = template.replace(old, new)
        type_needle_v = type_needle_v[:-1]
    keys = item.metadata["keys"]
    query = ", ".join(keys[:-1]) + ", and " + keys[-1] if len(keys) > 1 else keys[0]
    return template.format(type_needle_v=type_needle_v, context=item.context, query=query)


@pytest.mark.parametrize("config", NIAH_CONFIGS)
def test_niah_prompt_is_rulers(config: str) -> None:
    (item,) = lc_evals.ruler_suite([2500], n=1, seed=7, configs=[config])
    kind = lc_evals.RULER_CONFIGS[config].options["value_kind"]
    assert render_prompt(item) == _ruler_niah(item, kind + "s")
    assert item.metadata["answer_prefix"].startswith(" The special magic")
    # the plain wording stays available and is not RULER's
    (plain,) = lc_evals.ruler_suite([2500], n=1, seed=7, configs=[config], template="plain")
    assert render_prompt(plain) == f"{plain.context}\n\n{plain.question}"
    assert "prompt_template" not in plain.metadata


def test_multiquery_names_every_key_as_ruler_joins_them() -> None:
    (item,) = lc_evals.ruler_suite([3000], n=1, seed=1, configs=["niah_multiquery"])
    keys = item.metadata["keys"]
    assert len(keys) == 4
    joined = f"{keys[0]}, {keys[1]}, {keys[2]}, and {keys[3]}"
    assert item.question == (
        f"What are all the special magic numbers for {joined} mentioned in the provided text?"
    )


def _chain(context: str, value: str) -> list[str]:
    """The variables that hold ``value`` in ``context``'s assignments, in chain order."""
    held = re.findall(rf"VAR ([A-Z]+) = {value}\b", context)
    assert len(held) == 1
    chain = held
    while True:
        nxt = re.findall(rf"VAR ([A-Z]+) = VAR {chain[-1]}\b", context)
        if not nxt:
            return chain
        chain.append(nxt[0])


def test_vt_prompt_is_rulers_with_its_one_shot_example(tokenizer) -> None:
    (item,) = lc_evals.ruler_suite([1500], n=1, seed=2, configs=["vt"], tokenizer=tokenizer)
    value = item.metadata["value"]
    main = VT.format(context=item.context, query=value) + VT_PREFIX.format(num_v=5, query=value)
    prompt = render_prompt(item)
    assert prompt.endswith("\n\n" + main)
    shot = prompt[: -len(main) - 2]
    # the example: RULER's VT prompt of its own chain, its answer after the prefix
    m = re.fullmatch(
        re.escape(VT.split("{context}")[0]) + r"(?P<ctx>.*)\nQuestion: Find all variables that "
        r"are assigned the value (?P<v>\d{5}) in the text above\. Answer: According to the "
        r"chain\(s\) of variable assignment in the text above, 5 variables are assigned the "
        r"value (?P=v), they are:  (?P<ans>[A-Z]{3}(?: [A-Z]{3}){4})",
        shot,
        re.S,
    )
    assert m is not None, shot[:300]
    assert m["v"] != value
    assert m["ans"].split() == _chain(m["ctx"], m["v"])  # the example's answer is right
    assert len(tokenizer.encode(shot)) <= 500  # RULER's example length
    assert list(item.answers) == _chain(item.context, value)


@pytest.mark.parametrize(("length", "counts"), [(2000, (3, 1, 40)), (4096, (10, 3, 190))])
def test_cwe_prompt_is_rulers_with_its_one_shot_example(
    length: int, counts: tuple[int, int, int]
) -> None:
    (item,) = lc_evals.ruler_suite([length], n=1, seed=4, configs=["cwe"])
    prompt = render_prompt(item)
    main = CWE.format(context=item.context) + CWE_PREFIX
    assert prompt.endswith("\n" + main)
    shot = prompt[: -len(main) - 1]
    head, tail = CWE.split("{context}")
    assert shot.startswith(head)
    listed, answer = shot[len(head) :].split(tail + CWE_PREFIX + " ")
    common = re.findall(r"\d+\. (\S+)", answer)
    assert answer == " ".join(f"{i + 1}. {w}" for i, w in enumerate(common))
    entries = re.findall(r"\d+\. (\S+)", listed)
    assert listed == " ".join(f"{i + 1}. {w}" for i, w in enumerate(entries))
    common_freq, other_freq, total = counts  # RULER: (20, 3, 1) below 4096, (40, 10, 3) above
    freq = Counter(entries)
    assert len(entries) == total
    assert len(common) == 10
    assert all(freq[w] == common_freq for w in common)
    assert all(c == other_freq for w, c in freq.items() if w not in common)
    assert not set(common) & set(item.answers)  # the example never gives the answer away


def test_fwe_prompt_is_rulers_and_dots_lead_the_counts() -> None:
    (item,) = lc_evals.ruler_suite([3000], n=1, seed=0, configs=["fwe"])
    assert render_prompt(item) == FWE.format(context=item.context) + FWE_PREFIX
    counts = Counter(item.context.split())
    ranked = [w for w, _ in counts.most_common()]
    assert ranked[0] == "..."  # RULER's noise word, which the prompt says to ignore
    assert set(item.answers) == set(ranked[1:4])
    assert counts[ranked[3]] > counts[ranked[4]]


@pytest.mark.parametrize("config", ["qa_1", "qa_2"])
def test_qa_stand_in_uses_rulers_qa_prompt_and_documents(config: str) -> None:
    (item,) = lc_evals.ruler_suite([2500], n=1, seed=0, configs=[config])
    assert render_prompt(item) == QA.format(context=item.context, query=item.question) + QA_PREFIX
    documents = item.context.split("\n\n")
    assert documents == [f"Document {i + 1}:\n{p}" for i, p in enumerate(item.metadata["passages"])]


@pytest.mark.parametrize("config", list(lc_evals.RULER_CONFIGS))
def test_whole_prompt_and_reserve_fit_the_target_in_tokens(config: str, tokenizer) -> None:
    target = 1200
    (item,) = lc_evals.ruler_suite([target], n=1, seed=3, configs=[config], tokenizer=tokenizer)
    reserve = lc_evals.RULER_CONFIGS[config].tokens_to_generate
    assert item.metadata["reserve"] == reserve
    assert item.metadata["length_counts"] == "prompt"
    prompt_tokens = len(tokenizer.encode(render_prompt(item)))
    assert item.metadata["length"] == prompt_tokens
    assert prompt_tokens + reserve <= target
    slack = 60 if config.startswith("qa") else 12  # QA adds whole passages
    assert prompt_tokens + reserve >= target - slack
    # counting the context alone lets the prompt run past the target
    (alone,) = lc_evals.ruler_suite(
        [target], n=1, seed=3, configs=[config], tokenizer=tokenizer, length_counts="context"
    )
    assert len(tokenizer.encode(render_prompt(alone))) > target


def test_plain_prompt_can_be_counted_whole_with_a_reserve(tokenizer) -> None:
    (item,) = lc_evals.generate(
        "niah_single", n=1, length=800, seed=0, tokenizer=tokenizer, length_counts="prompt",
        reserve=20,
    )  # fmt: skip
    tokens = len(tokenizer.encode(f"{item.context}\n\n{item.question}"))
    assert 800 - 8 <= tokens + 20 <= 800
    assert item.metadata["length"] == tokens


def test_prompt_options_are_checked_at_the_boundary() -> None:
    with pytest.raises(ValueError, match="template must be one of"):
        lc_evals.generate("niah_single", n=1, length=800, seed=0, template="RULER")
    with pytest.raises(ValueError, match="length_counts must be one of"):
        lc_evals.generate("common_words", n=1, length=800, seed=0, length_counts="all")
    with pytest.raises(ValueError, match="reserve=5 needs length_counts='prompt'"):
        lc_evals.generate("frequent_words", n=1, length=800, seed=0, reserve=5)
    with pytest.raises(ValueError, match="reserve must be an integer >= 0"):
        lc_evals.generate("distractor_qa", n=1, length=800, seed=0, length_counts="prompt",
                          reserve=-1)  # fmt: skip
    with pytest.raises(ValueError, match="prompt around the context"):
        lc_evals.ruler_suite([300], n=1, seed=0, configs=["niah_single_1"])


def test_plain_context_counted_suite_is_the_configs_own_items() -> None:
    suite = lc_evals.ruler_suite([2000], n=1, seed=9, template="plain", length_counts="context")
    for item in suite:
        config = lc_evals.RULER_CONFIGS[item.metadata["ruler_config"]]
        (own,) = lc_evals.generate(config.task, n=1, length=2000, seed=9, **config.options)
        assert (item.context, item.question, item.answers) == (
            own.context,
            own.question,
            own.answers,
        )


def test_cli_writes_a_ruler_suite_that_runs_and_exports_the_answer_prefix(tmp_path) -> None:
    from typer.testing import CliRunner

    from lc_evals.cli import app

    runner = CliRunner()
    suite = tmp_path / "ruler.jsonl"
    res = runner.invoke(
        app,
        ["ruler", "-l", "2500", "-n", "2", "-c", "niah_single_1", "-c", "vt", "--out", str(suite)],
    )
    assert res.exit_code == 0, res.output
    items = lc_evals.load_suite(suite)
    assert [i.id for i in items] == [
        "niah_single_1/L2500/0",
        "niah_single_1/L2500/1",
        "vt/L2500/0",
        "vt/L2500/1",
    ]
    assert items == lc_evals.ruler_suite([2500], n=2, seed=0, configs=["niah_single_1", "vt"])

    class Echo:  # replies with the last line of the prompt it was sent
        identity = "echo-last-line"

        def chat(self, messages, **options):
            return messages[-1]["content"].rsplit("\n", 1)[-1]

    results = lc_evals.run(Echo(), items, tmp_path / "echo.jsonl")
    for r, i in zip(results, items):  # the model was sent RULER's prompt
        assert r.prediction.endswith(i.question + i.metadata["answer_prefix"])
    files = lc_evals.export_lm_eval(results, tmp_path / "out", model="echo")
    samples = [f for f in files if f.name.startswith("samples_niah_single_1")]
    doc = json.loads(samples[0].read_text().splitlines()[0])["doc"]
    assert doc["gen_prefix"] == items[0].metadata["answer_prefix"]
    bad = runner.invoke(app, ["ruler", "-l", "2500", "-c", "nope", "--out", str(suite)])
    assert bad.exit_code != 0
    assert "unknown RULER configuration" in bad.output


@pytest.mark.parametrize("config", ["niah_single_1", "niah_multikey_2", "niah_multikey_3", "vt"])
def test_noise_and_needle_haystacks_are_laid_out_in_lines_as_ruler_does(config: str) -> None:
    (item,) = lc_evals.ruler_suite([3000], n=1, seed=5, configs=[config])
    lines = item.context.split("\n")
    needles = set(item.metadata["needles"])
    block = " ".join(lc_evals.haystack.REPEAT_BLOCK)
    needle_line = re.compile(r"One of the special magic (numbers|uuids) for \S+ is: \S+\.")

    def is_needle(line: str) -> bool:
        return line in needles or bool(needle_line.fullmatch(line))

    cut = [i for i, line in enumerate(lines) if not is_needle(line) and line != block]
    # only the last filler line is cut to fit the length; needles may follow it
    assert len(cut) <= 1, [lines[i] for i in cut]
    for i in cut:
        start = "One of the special magic "  # a needle of the needle haystack, cut
        assert (
            block.startswith(lines[i]) or lines[i].startswith(start) or start.startswith(lines[i])
        )
        assert all(is_needle(line) for line in lines[i + 1 :])
    assert needles <= set(lines)
    assert len(lines) > 10
    # the plain wording keeps lc-evals' own layout: sentences joined by spaces
    (plain,) = lc_evals.ruler_suite([3000], n=1, seed=5, configs=[config], template="plain")
    assert "\n" not in plain.context
