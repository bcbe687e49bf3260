"""ACE roles, parsing and adaptation loops, driven by scripted test-double chat models.

The doubles stand in for a language model (the real SmolLM2 runs in the benchmark):
they read the prompt the roles build and answer deterministically, so the tests check
what the roles send, how they parse replies and how the loops update the store.
"""

from __future__ import annotations

import dataclasses
import json
import re

import numpy as np
import pytest

from lc_agents.ace import (
    DEFAULT_PROMPTS,
    Ace,
    AceConfig,
    AceItem,
    Curator,
    CuratorOutputError,
    Delta,
    Feedback,
    Generation,
    Generator,
    PlaybookStore,
    Reflector,
    RewriteMemory,
    cited_ids,
    extract_answer,
    extract_json,
)

# --------------------------------------------------------------------------- test doubles
ROUTES = {
    "invoices": "B7",
    "passwords": "S2",
    "refunds": "R4",
    "shipping": "L9",
    "outages": "N1",
    "upgrades": "U5",
}


def ticket(topic: str, n: int) -> AceItem:
    return AceItem(
        f"Route ticket #{n}: a customer writes about {topic}.",
        answer=ROUTES[topic],
        id=f"{topic}-{n}",
    )


class ScriptedRoutingModel:
    """Test double of a chat model for a ticket-routing task with hidden queue rules.

    * As generator it answers from a playbook line 'Tickets about X go to queue Q' (citing
      that line's id), else guesses 'Z0'.
    * As reflector it writes the rule from the ground truth line, or (online) from the
      feedback message; it tags cited bullets by the feedback verdict.
    * As curator it emits an ADD for each lesson the playbook does not already contain.
    """

    def __init__(self, curator_reply: str | None = None) -> None:
        self.calls: list[tuple[str, str]] = []
        self.curator_reply = curator_reply

    def chat(self, messages, **options):
        system, user = messages[0]["content"], messages[-1]["content"]
        role = (
            "reflector"
            if "review an attempt" in system
            else "curator"
            if "maintain a playbook" in system
            else "generator"
        )
        self.calls.append((role, user))
        return getattr(self, role)(user)

    def generator(self, user: str) -> str:
        topic = re.search(r"about (\w+)\.", user).group(1)
        for line in user.splitlines():
            m = re.match(rf"- \[([\w-]+)\].*Tickets about {topic} go to queue (\w+)", line)
            if m:
                return f"The playbook says so [{m.group(1)}].\nFinal answer: {m.group(2)}"
        return "No rule known.\nFinal answer: Z0"

    def reflector(self, user: str) -> str:
        topic = re.search(r"about (\w+)\.", user).group(1)
        truth = re.search(r"Correct answer: (\w+)", user) or re.search(
            r"queue for \w+ is (\w+)", user
        )
        used = re.findall(r"- \[([\w-]+)\]", user.split("Notes the attempt used:")[1])
        ok = "Feedback: correct" in user
        return json.dumps(
            {
                "diagnosis": "followed the rule" if ok else "did not know the queue",
                "insights": [f"Tickets about {topic} go to queue {truth.group(1)}."]
                if truth
                else [],
                "bullet_tags": [{"id": u, "tag": "helpful" if ok else "harmful"} for u in used],
            }
        )

    def curator(self, user: str) -> str:
        if self.curator_reply is not None:
            return self.curator_reply
        playbook, lessons = user.split("Review of the latest task:")
        ops = [
            {"op": "ADD", "section": "routing", "content": line[2:]}
            for line in lessons.splitlines()
            if line.startswith("- ") and line[2:] not in playbook
        ]
        return "Here you go:\n```json\n" + json.dumps({"operations": ops}) + "\n```"


def routing_feedback(item: AceItem, attempt: Generation) -> Feedback:
    """Execution feedback only: the helpdesk bounces a wrong queue and says where it belongs."""
    if attempt.answer == item.answer:
        return Feedback(True, "correct: the ticket was accepted")
    topic = re.search(r"about (\w+)\.", item.question).group(1)
    return Feedback(False, f"bounced: the queue for {topic} is {ROUTES[topic]}")


# --------------------------------------------------------------------------- parsing
@pytest.mark.parametrize(
    ("reply", "expected"),
    [
        ('{"a": 1}', {"a": 1}),
        ('Sure.\n```json\n{"a": [1, 2],}\n```\nDone', {"a": [1, 2]}),
        ("Here: {'a': 'x'} ok", {"a": "x"}),
        (
            'prefix {"s": "brace } inside", "n": {"m": 2}} suffix {"b": 3}',
            {"s": "brace } inside", "n": {"m": 2}},
        ),
        ('[1, 2] then {"k": true}', {"k": True}),
    ],
)
def test_extract_json_tolerates_fences_prose_and_small_errors(reply, expected):
    assert extract_json(reply) == expected


def test_extract_json_failure_names_the_reply():
    with pytest.raises(CuratorOutputError, match=r"no JSON dict found.*I would add a note"):
        extract_json("I would add a note about cents. {not json")
    assert extract_json("ops: [1, 2]", expect=list) == [1, 2]


def test_cited_ids_and_answers():
    text = "Using [rules-00002] and rules-00009, again [rules-00002]. x-1 is not an id."
    assert cited_ids(text) == ["rules-00002", "rules-00009"]
    assert cited_ids(text, known={"rules-00009"}) == ["rules-00009"]
    assert extract_answer("thinking\n**Final Answer:** B7\n") == "B7"
    assert extract_answer("Answer: 1\nFinal answer: 2") == "2"
    assert extract_answer("just this line") == "just this line"


# --------------------------------------------------------------------------- roles
def test_generator_sends_the_budgeted_playbook_and_cites_only_known_ids():
    store = PlaybookStore()
    store.apply(
        [
            Delta.add("routing", "Tickets about invoices go to queue B7."),
            Delta.add("misc", "x" * 200),
        ]
    )
    model = ScriptedRoutingModel()
    gen = Generator(model, budget=80)
    out = gen.answer("Route ticket #1: a customer writes about invoices.", store)
    assert (out.answer, out.used_ids) == ("B7", ["routing-00001"])
    sent = model.calls[0][1]
    assert "queue B7" in sent
    assert "x" * 200 not in sent  # over the budget
    # ids the playbook does not hold are not reported as used
    assert (
        Generator(_Const("see [routing-00042]\nFinal answer: 1")).answer("q", store).used_ids == []
    )
    with pytest.raises(ValueError, match="question"):
        gen.answer("  ", store)


class _Const:
    """Test double: a chat model that always returns the same text and records prompts."""

    def __init__(self, *replies: str) -> None:
        self.replies = list(replies)
        self.prompts: list[str] = []

    def chat(self, messages, **options):
        self.prompts.append(messages[-1]["content"])
        return self.replies[min(len(self.prompts), len(self.replies)) - 1]


def test_reflector_keeps_valid_tags_of_cited_bullets_only():
    attempt = Generation("q", "a", ["r-00001", "r-00002"], "raw")
    reply = json.dumps(
        {
            "diagnosis": "ok",
            "insights": ["one", {"content": "two"}, "", 3],
            "bullet_tags": [
                {"id": "r-00001", "tag": "Helpful"},
                {"id": "r-00002", "tag": "excellent"},
                {"id": "r-00099", "tag": "harmful"},
            ],
        }
    )
    r = Reflector(_Const(reply)).reflect(attempt, "correct")
    assert (r.diagnosis, r.insights, r.tags, r.error) == (
        "ok",
        ["one", "two"],
        {"r-00001": "helpful"},
        None,
    )
    bad = Reflector(_Const("I think it went fine.")).reflect(attempt, "correct")
    assert bad.error is not None
    assert bad.insights == []


def test_reflector_refinement_rounds_see_the_previous_reflection_and_stop_when_stable():
    first = json.dumps({"diagnosis": "vague", "insights": ["be careful"]})
    second = json.dumps({"diagnosis": "wrong queue", "insights": ["Invoices go to B7."]})
    model = _Const(first, second, second, second)
    r = Reflector(model, rounds=4).reflect(
        Generation("q", "a", [], "raw"), "bounced", ground_truth="B7"
    )
    assert r.insights == ["Invoices go to B7."]
    assert len(model.prompts) == 3  # round 3 repeated round 2 -> stop
    assert "Correct answer: B7" in model.prompts[0]
    assert "be careful" in model.prompts[1]
    assert r.rounds == 3
    with pytest.raises(ValueError, match="rounds"):
        Reflector(model, rounds=0)


def test_curator_parses_operations_and_rejects_malformed_ones():
    reply = json.dumps(
        {
            "operations": [
                {"op": "ADD", "content": "no section given"},
                {"op": "UPDATE", "id": "r-00001", "content": "better"},
                {"op": "MERGE", "ids": ["r-00001", "r-00001"]},
                {"op": "DELETE"},
                {"op": "SHOUT", "content": "x"},
                "not an object",
            ]
        }
    )
    c = Curator(_Const(reply), default_section="lessons").parse(reply, item="t1")
    assert [d.op for d in c.deltas] == ["ADD", "UPDATE"]
    assert c.deltas[0].section == "lessons"
    assert c.deltas[0].provenance == {"item": "t1"}
    assert len(c.rejected) == 4
    assert any("itself" in reason for _, reason in c.rejected)
    bare = Curator(_Const("")).parse('[{"op": "delete", "id": "r-00001"}]')
    assert bare.deltas == [Delta.delete("r-00001")]
    assert Curator(_Const("")).parse("no idea").error is not None
    assert (
        Curator(_Const("")).parse('{"answer": 1}').error
        == "the reply's JSON has no 'operations' list"
    )


def test_curator_strips_the_prompts_labels_copied_into_notes():
    """A small model copied "Diagnosis: (none)" and "Lessons: - ..." into its ADDs."""
    reply = json.dumps(
        {
            "operations": [
                {"op": "ADD", "content": "Diagnosis: (none)"},
                {"op": "ADD", "content": "Lessons: - Refunds for NK-71 of $330 or more go to W1."},
                {"op": "UPDATE", "id": "r-00001", "content": "  - lessons:"},
                {"op": "ADD", "content": "Refunds: over $50 go to R7"},
            ]
        }
    )
    c = Curator(_Const(reply)).parse(reply)
    assert [d.content for d in c.deltas] == [
        "Refunds for NK-71 of $330 or more go to W1.",
        "Refunds: over $50 go to R7",  # not a label of the curator's prompt
    ]
    assert [e["content"] for e, _ in c.rejected] == ["Diagnosis: (none)", "  - lessons:"]
    assert all("labels" in reason for _, reason in c.rejected)
    # labels follow a replaced prompt
    prompts = dataclasses.replace(
        DEFAULT_PROMPTS, curator_user="Notes:\n{playbook}\nWhy: {diagnosis}\nTips: {insights}"
    )
    custom = Curator(_Const(""), prompts=prompts)
    assert custom.strip_echo("Tips: keep W1") == "keep W1"
    assert custom.strip_echo("Lessons: keep W1") == "Lessons: keep W1"


# --------------------------------------------------------------------------- loops
TRAIN = [ticket(t, n) for n in range(2) for t in ["invoices", "passwords", "refunds", "shipping"]]
TEST = [
    ticket(t, n) for n in range(10, 12) for t in ["invoices", "passwords", "refunds", "shipping"]
]


def accuracy(answer, items) -> float:
    return sum(answer(i.question).answer == i.answer for i in items) / len(items)


def test_offline_adaptation_learns_rules_that_transfer_to_held_out_items():
    model = ScriptedRoutingModel()
    ace = Ace(model, PlaybookStore(), config=AceConfig(epochs=2, dedup="off", progress=False))
    assert accuracy(ace.answer, TEST) == 0.0
    report = ace.adapt_offline(TRAIN)
    assert len(report.steps) == 2 * len(TRAIN)
    assert accuracy(ace.answer, TEST) == 1.0
    assert len(ace.store) == 4  # one bullet per rule: the curator adds only new lessons
    # the second visit of a topic and the whole second epoch are answered correctly
    assert [s["correct"] for s in report.steps[:4]] == [False] * 4
    assert all(s["correct"] for s in report.steps[4:])
    # cited bullets were tagged helpful by the reflector on each correct use
    assert sum(b.helpful for b in ace.store.bullets()) == len(report.steps) - 4
    assert all(b.provenance["role"] == "curator" for b in ace.store.bullets())


def test_online_adaptation_uses_feedback_only():
    model = ScriptedRoutingModel()
    ace = Ace(model, PlaybookStore(), config=AceConfig(dedup="off", progress=False))
    report = ace.adapt_online(TEST, routing_feedback)
    reflector_prompts = [u for role, u in model.calls if role == "reflector"]
    assert reflector_prompts
    assert not any("Correct answer" in p for p in reflector_prompts)
    # each topic is missed once, then answered from the learned bullet
    assert report.accuracy == pytest.approx(0.5)
    with pytest.raises(ValueError, match="needs labels"):
        ace.adapt_offline([AceItem("unlabelled")])


def test_curator_fallback_adds_the_insights_when_its_reply_is_unusable():
    model = ScriptedRoutingModel(curator_reply="I cannot produce JSON today.")
    ace = Ace(
        model,
        PlaybookStore(),
        config=AceConfig(dedup="off", progress=False, fallback_section="lessons"),
    )
    ace.adapt_offline(TRAIN[:2])
    assert [b.section for b in ace.store.bullets()] == ["lessons", "lessons"]
    assert accuracy(ace.answer, TEST) == 0.5
    strict = Ace(
        ScriptedRoutingModel(curator_reply="nope"),
        PlaybookStore(),
        config=AceConfig(dedup="off", progress=False, curator_fallback=False),
    )
    rep = strict.adapt_offline(TRAIN[:2])
    assert len(strict.store) == 0
    assert rep.steps[0]["curation_error"] is not None


def test_invalid_curator_operations_are_skipped_not_fatal():
    reply = json.dumps(
        {
            "operations": [
                {"op": "DELETE", "id": "routing-00077"},
                {"op": "ADD", "section": "s", "content": "kept"},
            ]
        }
    )
    ace = Ace(
        ScriptedRoutingModel(curator_reply=reply),
        PlaybookStore(),
        config=AceConfig(dedup="off", progress=False),
    )
    ace.adapt_offline(TRAIN[:1])
    assert [b.content for b in ace.store.bullets()] == ["kept"]


class _Interrupt(RuntimeError):
    pass


class FailingAfter(ScriptedRoutingModel):
    """Test double: the routing model that fails on its n-th generator call (a crash)."""

    def __init__(self, n: int) -> None:
        super().__init__()
        self.n = n
        self.generated = 0

    def generator(self, user: str) -> str:
        self.generated += 1
        if self.generated == self.n:
            raise _Interrupt("power cut")
        return super().generator(user)


def test_an_interrupted_run_resumes_from_the_store(tmp_path):
    path = tmp_path / "playbook.sqlite"
    cfg = AceConfig(epochs=2, dedup="off", progress=False)
    first = Ace(FailingAfter(6), PlaybookStore(path), config=cfg)
    with pytest.raises(_Interrupt):
        first.adapt_offline(TRAIN)
    assert PlaybookStore(path).get_progress("offline")["done"] == 5
    model = ScriptedRoutingModel()
    resumed = Ace(model, PlaybookStore(path), config=cfg)
    report = resumed.adapt_offline(TRAIN)
    assert report.resumed == 5
    assert sum(1 for role, _ in model.calls if role == "generator") == 2 * len(TRAIN) - 5
    assert len(report.steps) == 2 * len(TRAIN)
    assert len(resumed.store) == 4
    # a finished run is not repeated; a different schedule under the same name is refused
    assert resumed.adapt_offline(TRAIN).resumed == 2 * len(TRAIN)
    with pytest.raises(ValueError, match="another run name"):
        resumed.adapt_offline(TRAIN[:3])


def test_cited_bullets_are_credited_when_the_reflector_gives_no_tags():
    store = PlaybookStore()
    store.apply([Delta.add("routing", "Tickets about invoices go to queue B7.")])
    ace = Ace(_Const("{}"), store, config=AceConfig(dedup="off", progress=False))
    attempt = Generation("q", "B7", ["routing-00001"], "raw")
    ace.step(AceItem("q"), Feedback(True, "ok"), attempt)
    ace.step(AceItem("q"), Feedback(False, "bad"), attempt)
    b = store.get("routing-00001")
    assert (b.helpful, b.harmful) == (1, 1)


def test_rewrite_baseline_replaces_the_memory_each_step():
    model = _Const("Final answer: B7", "memory v1", "Final answer: S2", "memory v2")
    memory = RewriteMemory(model, max_chars=8)
    report = memory.adapt_offline(TRAIN[:2])
    assert memory.memory == "memory v"  # cut to max_chars
    assert memory.sizes == [8, 8]
    assert report.correct == 2
    assert "Current cheatsheet:\nmemory v" in model.prompts[3]


def test_config_validation():
    for kwargs, field in [
        ({"epochs": 0}, "epochs"),
        ({"reflection_rounds": 0}, "reflection_rounds"),
        ({"budget": 0}, "budget"),
        ({"dedup": "sometimes"}, "dedup"),
        ({"dedup_threshold": 1.5}, "dedup_threshold"),
        ({"fallback_section": " "}, "fallback_section"),
    ]:
        with pytest.raises(ValueError, match=field):
            AceConfig(**kwargs)
    with pytest.raises(ValueError, match="unknown roles"):
        Ace(_Const(""), PlaybookStore(), options={"planner": {}})


def test_proactive_dedup_runs_after_each_step_with_the_given_embedder():
    class SameVector:
        """Test double of an embedder: every text maps to the same unit vector."""

        name, dim = "same-vector", 2
        calls = 0

        def embed_texts(self, texts):
            SameVector.calls += 1
            return np.ones((len(texts), 2)) / np.sqrt(2)

    model = ScriptedRoutingModel()
    store = PlaybookStore()
    store.apply([Delta.add("routing", "Tickets about invoices go to queue B7.")] * 2)
    ace = Ace(model, store, embedder=SameVector(), config=AceConfig(progress=False))
    ace.adapt_offline(TRAIN[:3])
    assert SameVector.calls >= 3
    # everything looked identical to the embedder: the repeated rule is merged, the
    # rules naming other queues are kept
    contents = [b.content for b in ace.store.bullets()]
    assert sorted(set(contents)) == sorted(contents)
    assert len(contents) == 3
    merged = ace.store.get("routing-00001")
    assert merged.provenance["merged_from"][0] == "routing-00002"
