"""MemAgent's note-writing presets: streaming chunks, abstention, provenance, many questions.

``ScriptedNotes`` is a stand-in chat backend (no model): it plays a reader that notes a
chunk's sentences naming the question's subject, so provenance and abstention can be
checked against known answers. Runs with the real tiny local model check that the
prefix cache and ``run_many`` do not change what the model writes.
"""

from __future__ import annotations

import re
import tracemalloc
from dataclasses import replace
from typing import Any

import pytest

from lc_agents.errors import InputError
from lc_agents.memagent import (
    ABSTAIN_ANSWER,
    MEMAGENT_PRESETS,
    MemAgent,
    MemAgentConfig,
    MemAgentPrompts,
    default_preset,
)
from lc_agents.memagent.agent import extract_boxed, iter_token_chunks, says_not_found

FILLER = "The quiet river runs past the old stone mill. "


class ScriptedNotes:
    """Stand-in backend: notes the section's sentences that contain the subject word."""

    def __init__(self, subject: str, answer: str | None = None) -> None:
        self.subject = subject
        self.answer = answer
        self.calls: list[str] = []

    def chat(self, messages: Any, **_: Any) -> str:
        text = messages[-1]["content"]
        self.calls.append(text)
        section = re.search(r"<section>\n(.*?)\n</section>", text, re.S)
        if section is None:  # the answer prompt
            notes = text.split("\n\nQuestion:")[0]
            if self.subject in notes:
                return self.answer or notes.splitlines()[-1]
            return "I cannot tell; the notes do not say."
        notes = text.split("Notes so far:\n", 1)[1].split("\n\n", 1)[0]
        hits = [s.strip() for s in re.split(r"(?<=\.)\s", section.group(1)) if self.subject in s]
        if not hits:
            return "none"
        old = [] if notes.startswith("(no notes") else [notes]
        return "\n".join([*old, *hits])

    async def achat(self, messages: Any, **o: Any) -> str:
        return self.chat(messages, **o)

    def chat_batch(self, conversations: Any, **o: Any) -> list[str]:
        return [self.chat(m, **o) for m in conversations]


def _doc(facts: dict[int, str], n: int = 12) -> str:
    """``n`` filler paragraphs of ~64 words, with ``facts[i]`` appended to paragraph i."""
    paras = [FILLER * 6 + facts.get(i, "") for i in range(n)]
    return "\n\n".join(paras)


def test_presets_are_named_and_validated() -> None:
    assert set(MEMAGENT_PRESETS) == {"notes", "paper", "sentences", "evidence"}
    notes = MemAgentConfig.preset("notes")
    assert (notes.chunk_tokens, notes.memory_tokens, notes.abstain) == (5000, 1024, ABSTAIN_ANSWER)
    paper = MemAgentConfig.preset("paper")
    assert (paper.chunk_tokens, paper.memory_tokens) == (5000, 1024)
    assert paper.answer_format == "boxed"
    assert paper.abstain is None
    for tag in ("<problem>", "<memory>", "<section>"):
        assert tag in paper.prompts.update
    assert "\\boxed{}" in paper.prompts.answer.format(question="q", memory="m")
    assert MemAgentConfig.preset("sentences").memory_mode == "score"
    with pytest.raises(ValueError, match="unknown MemAgent preset 'fast'"):
        MemAgentConfig.preset("fast")
    with pytest.raises(ValueError, match="answer_format"):
        MemAgentConfig(answer_format="json")
    with pytest.raises(ValueError, match="abstain"):
        MemAgentConfig(abstain="  ")
    assert default_preset("smollm2-135m-instruct") == "sentences"
    assert default_preset("qwen2.5-coder-0.5b-instruct") == default_preset(None) == "sentences"
    assert default_preset("qwen3-8b") == default_preset("/models/llama-70b") == "notes"


def test_notes_prompt_puts_the_section_first() -> None:
    """The shared prefix of several questions' updates over one chunk is the chunk."""
    template = MemAgentPrompts.notes().update
    assert template.index("{chunk}") < template.index("{question}") < template.index("{memory}")


@pytest.mark.parametrize(
    ("reply", "absent"),
    [
        ("not found in the document", True),
        ("Not found in the document.", True),
        ("The notes do not mention a cat.", True),
        ("No information about it.", True),
        ("unknown", True),
        ("Vessby", False),
        ("The key hangs behind the calendar.", False),
        ("Found in the north wing", False),
    ],
)
def test_says_not_found(reply: str, absent: bool) -> None:
    assert says_not_found(reply) is absent


def test_extract_boxed_takes_the_last_box_and_nested_braces() -> None:
    assert extract_boxed("first \\boxed{a} then \\boxed{b}") == "b"
    assert extract_boxed("\\boxed{\\frac{1}{2}} done") == "\\frac{1}{2}"
    assert extract_boxed("no box here ") == "no box here"
    assert extract_boxed("\\boxed{open") == "open"


def test_streamed_chunks_equal_whole_document_tokenization(tiny_tokenizer) -> None:
    from lc_agents.memagent import split_tokens

    text = _doc({3: "Tobin Asher works in Vessby. "}, n=400)  # ~160K characters
    whole = tiny_tokenizer.encode(text, add_special_tokens=False)
    streamed = list(iter_token_chunks(tiny_tokenizer, text, 500))
    assert streamed == split_tokens(whole, 500)
    pieces = (text[i : i + 7919] for i in range(0, len(text), 7919))  # arbitrary cuts
    assert list(iter_token_chunks(tiny_tokenizer, pieces, 500)) == streamed
    with pytest.raises(InputError, match="must be strings"):
        list(iter_token_chunks(tiny_tokenizer, [b"bytes"], 10))  # type: ignore[list-item]


def test_streaming_keeps_memory_flat(tiny_tokenizer) -> None:
    """Python-side allocations while chunking stay far below the document's token list."""

    def peak(n_paragraphs: int) -> int:
        pieces = (FILLER * 6 + "\n\n" for _ in range(n_paragraphs))
        tracemalloc.start()
        count = sum(len(c) for c in iter_token_chunks(tiny_tokenizer, pieces, 1000))
        _, top = tracemalloc.get_traced_memory()
        tracemalloc.stop()
        assert count > 0
        return top

    small, large = peak(200), peak(3200)  # 16x the text
    assert large < 2 * small + 2_000_000


def test_empty_memory_abstains_without_asking_the_model() -> None:
    backend = ScriptedNotes("Dalia")
    agent = MemAgent(backend, MemAgentConfig.notes(chunk_tokens=64), tokenizer=_ws_tokenizer())
    result = agent.run(_doc({}), "What is the name of Dalia Fenwick's cat?")
    assert (result.answer, result.found, result.sources) == (ABSTAIN_ANSWER, False, ())
    assert all("<section>" in c for c in backend.calls)  # no answer call was made
    assert all(step.kept for step in result.trace)


def test_a_reply_saying_not_found_becomes_the_abstention_phrase() -> None:
    backend = ScriptedNotes("Tobin")
    cfg = MemAgentConfig.notes(chunk_tokens=64, abstain="no answer in the text")
    agent = MemAgent(backend, cfg, tokenizer=_ws_tokenizer())
    agent_answer = agent.answer_found("Who is Dalia?", "Tobin Asher works in Vessby.")
    assert agent_answer == ("Tobin Asher works in Vessby.", True)
    assert agent.answer_found("Who?", "Other notes.") == ("no answer in the text", False)


def test_abstention_off_answers_whatever_the_model_says() -> None:
    backend = ScriptedNotes("Dalia")
    agent = MemAgent(
        backend, MemAgentConfig.notes(chunk_tokens=64, abstain=None), tokenizer=_ws_tokenizer()
    )
    answer, found = agent.answer_found("Where?", "Other notes.")
    assert found
    assert answer == "I cannot tell; the notes do not say."


def test_sources_name_the_chunks_the_memory_came_from() -> None:
    facts = {2: "Mara Quell's brother is Tobin Asher. ", 9: "Tobin Asher works in Vessby. "}
    doc = _doc(facts)
    tok = _ws_tokenizer()
    agent = MemAgent(ScriptedNotes("Tobin"), MemAgentConfig.notes(chunk_tokens=64), tokenizer=tok)
    result = agent.run(doc, "Where does Mara Quell's brother work?")
    chunk_of = {i: _chunk_index(tok, doc, fact, 64) for i, fact in facts.items()}
    assert result.found
    assert result.sources == tuple(sorted(chunk_of.values()))
    assert "Vessby" in result.memory


def test_rewording_the_notes_does_not_credit_the_chunk() -> None:
    """A chunk that only makes the model rephrase its notes is not a source."""

    class Rephrasing(ScriptedNotes):
        def chat(self, messages: Any, **o: Any) -> str:
            reply = super().chat(messages, **o)
            text = messages[-1]["content"]
            notes = text.split("Notes so far:\n", 1)[-1].split("\n\n", 1)[0]
            if reply == "none" and "<section>" in text and not notes.startswith("(no"):
                return "In short: " + notes.replace("\n", " ").lower()
            return reply

    doc = _doc({3: "Tobin Asher works in Vessby. "})
    tok = _ws_tokenizer()
    agent = MemAgent(Rephrasing("Tobin"), MemAgentConfig.notes(chunk_tokens=64), tokenizer=tok)
    result = agent.run(doc, "Where does Tobin work?")
    assert result.memory.startswith("In short:")  # rewritten after the fact's chunk
    assert result.sources == (_chunk_index(tok, doc, "Tobin Asher works", 64),)


def test_resume_from_a_checkpoint_keeps_the_sources(tmp_path) -> None:
    facts = {1: "Tobin Asher is a glassblower. ", 10: "Tobin Asher works in Vessby. "}
    doc = _doc(facts)
    tok = _ws_tokenizer()
    cfg = MemAgentConfig.notes(chunk_tokens=64)
    full = MemAgent(ScriptedNotes("Tobin"), cfg, tokenizer=tok).run(doc, "Where?")
    ckpt = tmp_path / "run.json"

    class Stop(Exception):
        pass

    def stop_after_five(step: Any) -> None:
        if step.chunk_index == 4:
            raise Stop

    with pytest.raises(Stop):
        MemAgent(ScriptedNotes("Tobin"), cfg, tokenizer=tok).run(
            doc, "Where?", checkpoint=ckpt, on_step=stop_after_five
        )
    resumed = MemAgent(ScriptedNotes("Tobin"), cfg, tokenizer=tok).run(
        doc, "Where?", checkpoint=ckpt
    )
    assert resumed.resumed_from == 5
    assert (resumed.answer, resumed.memory, resumed.sources) == (
        full.answer,
        full.memory,
        full.sources,
    )


def test_a_streamed_document_cannot_use_a_checkpoint(tmp_path) -> None:
    agent = MemAgent(ScriptedNotes("x"), MemAgentConfig.notes(), tokenizer=_ws_tokenizer())
    with pytest.raises(InputError, match="checkpoint needs the document as a string"):
        agent.run(iter(["a b c"]), "q?", checkpoint=tmp_path / "c.json")


def test_run_many_equals_one_run_per_question() -> None:
    doc = _doc({2: "Tobin Asher works in Vessby. ", 7: "Mara Quell owns a red boat. "})
    tok = _ws_tokenizer()
    cfg = MemAgentConfig.notes(chunk_tokens=64)
    questions = ["Where does Tobin work?", "What does Mara own?", "Who is Dalia?"]
    subjects = ["Tobin", "Mara", "Dalia"]
    singles = [
        MemAgent(ScriptedNotes(s), cfg, tokenizer=tok).run(doc, q)
        for s, q in zip(subjects, questions)
    ]

    class BySubject(ScriptedNotes):
        def chat(self, messages: Any, **o: Any) -> str:
            text = messages[-1]["content"]
            self.subject = next(s for s, q in zip(subjects, questions) if q in text)
            return super().chat(messages, **o)

    many = MemAgent(BySubject(""), cfg, tokenizer=tok).run_many(doc, questions)
    for one, other in zip(singles, many):
        assert (one.answer, one.found, one.sources, one.memory) == (
            other.answer,
            other.found,
            other.sources,
            other.memory,
        )
    assert [r.found for r in many] == [True, True, False]
    with pytest.raises(InputError, match="at least one question"):
        MemAgent(BySubject(""), cfg, tokenizer=tok).run_many(doc, [])


def test_paper_preset_answers_with_the_boxed_content() -> None:
    class Boxed(ScriptedNotes):
        def chat(self, messages: Any, **o: Any) -> str:
            text = messages[-1]["content"]
            if "<section>" in text:
                return "Tobin Asher works in Vessby."
            assert messages[0]["role"] == "user"  # the paper's prompts have no system
            return "The memory says so: \\boxed{Vessby}"

    agent = MemAgent(Boxed("x"), MemAgentConfig.paper(chunk_tokens=64), tokenizer=_ws_tokenizer())
    result = agent.run(_doc({}), "Where does Tobin work?")
    assert result.answer == "Vessby"


def test_local_prefix_cache_gives_the_same_replies(tiny_model_dir) -> None:
    from lc_agents.backends.local import LocalBackend

    cached = LocalBackend(tiny_model_dir, max_tokens=12)
    plain = LocalBackend(tiny_model_dir, max_tokens=12, prefix_cache=False)
    doc = " ".join(FILLER for _ in range(30))
    for q in ("What runs past the mill?", "Where is the stone?", "What is old?"):
        msgs = [{"role": "user", "content": f"{doc}\n\n{q}"}]
        assert cached.chat(msgs) == plain.chat(msgs)
    assert cached.prefix_hits == 2
    assert plain.prefix_hits == 0


def test_run_many_with_the_local_model_matches_single_runs(tiny_backend, document) -> None:
    cfg = replace(MemAgentConfig.notes(chunk_tokens=96, memory_tokens=10), answer_tokens=6)
    questions = ["What is the river number?", "Which city is golden?"]
    singles = [MemAgent(tiny_backend, cfg).run(document, q) for q in questions]
    hits = tiny_backend.prefix_hits
    many = MemAgent(tiny_backend, cfg).run_many(document, questions)
    assert [(r.answer, r.memory) for r in many] == [(r.answer, r.memory) for r in singles]
    assert tiny_backend.prefix_hits > hits


def _ws_tokenizer() -> Any:
    """A whitespace-preserving word tokenizer (ids index a growing vocabulary)."""

    class Words:
        def __init__(self) -> None:
            self.vocab: dict[str, int] = {}
            self.inverse: list[str] = []

        def encode(self, text: str, add_special_tokens: bool = False) -> list[int]:
            ids = []
            for piece in re.findall(r"\s*\S+|\s+", text):
                if piece not in self.vocab:
                    self.vocab[piece] = len(self.inverse)
                    self.inverse.append(piece)
                ids.append(self.vocab[piece])
            return ids

        def decode(self, ids: Any, skip_special_tokens: bool = False) -> str:
            return "".join(self.inverse[i] for i in ids)

    return Words()


def _chunk_index(tok: Any, doc: str, fact: str, chunk_tokens: int) -> int:
    """Index of the chunk holding the start of ``fact``."""
    before = doc[: doc.index(fact)]
    return len(tok.encode(before)) // chunk_tokens


def test_scored_memory_abstains_when_the_best_sentence_names_no_one_asked(tiny_backend) -> None:
    from lc_agents.memagent.agent import names_match, question_names

    assert question_names("What colour did Orlen Hesketh paint the shed?") == {"Orlen", "Hesketh"}
    assert question_names("What is the special magic number for river?") == set()
    assert names_match("Where does Mara Quell work?", "Mara Quell works in Vessby.")
    assert not names_match("Where does Mara Quell work?", "Tobin Asher works in Vessby.")
    agent = MemAgent(tiny_backend, MemAgentConfig.sentences())
    assert agent.answer_found("Where does Mara Quell work?", "Tobin Asher works in Vessby.") == (
        ABSTAIN_ANSWER,
        False,
    )
    assert agent.answer_found("Where does Mara Quell work?", "Mara Quell works in Vessby.") == (
        "Mara Quell works in Vessby.",
        True,
    )
    assert agent.answer_found("Where?", "") == (ABSTAIN_ANSWER, False)
    plain = MemAgent(tiny_backend, MemAgentConfig.sentences(abstain=None))
    assert plain.answer_found("Where does Mara Quell work?", "Tobin Asher works in Vessby.")[1]


def test_evidence_preset_follows_names_into_the_second_hop(tiny_backend) -> None:
    tok = tiny_backend.tokenizer
    agent = MemAgent(tiny_backend, MemAgentConfig.evidence(recall_top=0))  # names only
    chunk = tok.encode(
        "The river is quiet. Perrin Dunmore was born in Marrowick. The mill is old.",
        add_special_tokens=False,
    )
    question = "In which village was Quilla Wexley's apprentice born?"

    def texts(memory: str) -> list[str]:
        found = agent._candidates(question, chunk, sentences=True, memory=memory)
        return [tok.decode(c).strip() for c in found]

    assert "Perrin Dunmore was born in Marrowick." not in texts("")
    bridged = texts("Quilla Wexley's apprentice is Perrin Dunmore.")
    assert "Perrin Dunmore was born in Marrowick." in bridged
    assert "The mill is old." not in bridged
    sentences = MemAgent(tiny_backend, MemAgentConfig.sentences())
    found = sentences._candidates(
        question, chunk, sentences=True, memory="Quilla Wexley's apprentice is Perrin Dunmore."
    )
    assert all("Marrowick" not in tok.decode(c) for c in found)  # no name following


def test_evidence_answer_is_generated_and_abstains_without_the_asked_name(tiny_backend) -> None:
    cfg = MemAgentConfig.evidence(recall_top=0)
    assert not cfg.copy_answer
    assert cfg.follow_names
    agent = MemAgent(tiny_backend, cfg)
    assert agent.answer_found("Where does Mara Quell work?", "Tobin Asher works in Vessby.") == (
        ABSTAIN_ANSWER,
        False,
    )
    answer, _ = agent.answer_found("Where does Mara Quell work?", "Mara Quell works in Vessby.")
    assert answer  # generated by the (random) tiny model, not copied
