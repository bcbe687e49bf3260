"""Context collapse: delta updates keep details that rewrite-everything memories lose.

Over N rounds each task teaches one new fact (a vault's access code). Both systems get
the same information each round from the same test-double model. The rewrite baseline
(Dynamic-Cheatsheet style) asks the model to rewrite its whole memory; the double
behaves like a brevity-biased summarizer: it keeps the newest few facts verbatim and
folds older ones into a vague summary line. ACE only ever applies delta operations, so
every fact survives; de-duplication runs with the real MiniLM and must not merge
distinct facts. Recall is measured on the final context and by asking every question.
"""

from __future__ import annotations

import json
import re

import pytest

from lc_agents.ace import (
    Ace,
    AceConfig,
    AceItem,
    Delta,
    Feedback,
    Generation,
    PlaybookStore,
    RewriteMemory,
)
from lc_agents.retrieval import MiniLMEmbedder

NAMES = [
    "Amber", "Cobalt", "Crimson", "Delta", "Ember", "Falcon", "Garnet", "Harbor", "Indigo", "Jasper",
    "Krypton", "Lumen", "Marble", "Nimbus", "Onyx", "Pewter", "Quartz", "Raven", "Sierra", "Tundra",
]  # fmt: skip
CODES = {name: str(1000 + (7919 * (i + 3)) % 9000) for i, name in enumerate(NAMES)}
KEEP_RECENT = 4


def vault_item(name: str) -> AceItem:
    return AceItem(f"What is the access code of the {name} vault?", answer=CODES[name], id=name)


def vault_feedback(item: AceItem, attempt: Generation) -> Feedback:
    if attempt.answer == item.answer:
        return Feedback(True, "the vault opened")
    return Feedback(False, f"the vault stayed shut; the {item.id} vault code is {item.answer}")


FACT = re.compile(r"The (\w+) vault opens with code (\d{4})\.")


class BrevityBiasedModel:
    """Test double of a chat model for the vault task.

    Generator: answers from a context line 'The X vault opens with code N.' (citing its id
    when there is one). Reflector/curator: state the fact from the feedback and ADD it.
    Rewriter: keeps the newest ``KEEP_RECENT`` facts verbatim and replaces older ones by
    one generic line, as a summarizer that favours brevity does.
    """

    def chat(self, messages, **options):
        system, user = messages[0]["content"], messages[-1]["content"]
        if "review an attempt" in system:
            m = re.search(r"the (\w+) vault code is (\d{4})", user)
            insights = [f"The {m.group(1)} vault opens with code {m.group(2)}."] if m else []
            return json.dumps(
                {"diagnosis": "missing code", "insights": insights, "bullet_tags": []}
            )
        if "maintain a playbook" in system:
            lessons = user.split("Lessons:")[1]
            ops = [
                {"op": "ADD", "section": "vaults", "content": c}
                for c in re.findall(r"- (The .*\.)", lessons)
            ]
            return json.dumps({"operations": ops})
        if "cheatsheet" in system:
            old = user.split("Current cheatsheet:\n")[1].split("\n\nLatest task:")[0]
            facts = FACT.findall(old)
            m = re.search(r"the (\w+) vault code is (\d{4})", user)
            if m:
                facts.append((m.group(1), m.group(2)))
            kept = [f"The {n} vault opens with code {c}." for n, c in facts[-KEEP_RECENT:]]
            older = len(facts) - len(kept)
            head = [f"Vaults have four-digit codes ({older} earlier ones seen)."] if older else []
            return "\n".join(head + kept)
        name = re.search(r"of the (\w+) vault", user).group(1)
        for line in user.splitlines():
            m = re.search(rf"(?:\[([\w-]+)\].*)?The {name} vault opens with code (\d{{4}})", line)
            if m:
                cite = f" [{m.group(1)}]" if m.group(1) else ""
                return f"Known{cite}.\nFinal answer: {m.group(2)}"
        return "Unknown.\nFinal answer: 0000"


def recall(context: str) -> float:
    found = dict(FACT.findall(context))
    return sum(found.get(n) == c for n, c in CODES.items()) / len(CODES)


@pytest.fixture(scope="module")
def minilm() -> MiniLMEmbedder:
    return MiniLMEmbedder()


def test_ace_keeps_the_details_a_rewrite_baseline_loses(minilm):
    items = [vault_item(n) for n in NAMES]
    model = BrevityBiasedModel()
    ace = Ace(
        model, PlaybookStore(), embedder=minilm, config=AceConfig(dedup="proactive", progress=False)
    )
    ace_report = ace.adapt_online(items, vault_feedback)
    rewrite = RewriteMemory(model)
    rewrite_report = rewrite.adapt_online(items, vault_feedback)

    # both saw every fact once and answered none correctly before learning it
    assert ace_report.correct == rewrite_report.correct == 0
    ace_context = ace.store.render()
    assert recall(ace_context) == 1.0
    assert len(ace.store) == len(NAMES)  # de-dup merged none of the distinct facts
    assert recall(rewrite.memory) == pytest.approx(KEEP_RECENT / len(NAMES))
    # the rewritten memory shrank relative to what it was told; the playbook grew
    assert len(rewrite.memory) < len(ace_context) / 3
    # asking every question again: the playbook answers all, the rewritten memory few
    ace_acc = sum(ace.answer(i.question).answer == i.answer for i in items) / len(items)
    rewrite_acc = sum(rewrite.answer(i.question).answer == i.answer for i in items) / len(items)
    assert ace_acc == 1.0
    assert rewrite_acc == pytest.approx(KEEP_RECENT / len(NAMES))
    # the answers cite the bullets they came from
    assert ace.answer(items[0].question).used_ids == [ace.store.bullets()[0].id]


def test_repeated_lessons_do_not_grow_the_playbook(minilm):
    """A second pass over the same tasks re-learns nothing new: near-duplicates merge."""
    model = BrevityBiasedModel()
    ace = Ace(
        model, PlaybookStore(), embedder=minilm, config=AceConfig(dedup="proactive", progress=False)
    )
    items = [vault_item(n) for n in NAMES[:5]]
    ace.adapt_online(items, vault_feedback)
    # a reworded copy of a known fact arrives (e.g. from another curator)
    ace.store.apply([Delta.add("vaults", f"The Amber vault opens with the code {CODES['Amber']}.")])
    assert len(ace.store) == 6
    second = ace.adapt_online(items, vault_feedback, run="second pass")
    assert second.accuracy == 1.0
    assert len(ace.store) == 5
    assert all(b.helpful == 1 for b in ace.store.bullets())  # cited once each, credited once
