"""BABILong-style tasks: procedurally generated bAbI-like stories in long background text.

A small world of people, places and objects is simulated; each action becomes one fact
sentence. The facts keep their order but are scattered through essay-like background
text (BABILong uses books; here the offline essay generator of
:mod:`lc_evals.haystack`, whose vocabulary never mentions these people, places or
objects). Task variants, named after the bAbI tasks they imitate:

- ``babilong_qa1`` single supporting fact: "Where is Mary?"
- ``babilong_qa2`` two supporting facts: "Where is the apple?" (carried by someone)
- ``babilong_qa3`` three supporting facts: "Where was the apple before the garden?"
- ``babilong_qa6`` yes/no: "Is Mary in the kitchen?"
- ``babilong_qa7`` counting: "How many objects is Mary carrying?"
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Any

from lc_evals.haystack import essay_sentences
from lc_evals.length import Insert
from lc_evals.tasks._common import Draft, ItemPrompt, Sizer, check_int
from lc_evals.types import TaskItem

PEOPLE: tuple[str, ...] = ("Mary", "John", "Daniel", "Sandra", "Fred", "Julie", "Bill", "Emma")
PLACES: tuple[str, ...] = ("kitchen", "garden", "hallway", "bathroom", "bedroom", "office")
OBJECTS: tuple[str, ...] = ("apple", "football", "milk", "umbrella", "key", "book")
MOVE_VERBS: tuple[str, ...] = ("went to", "moved to", "journeyed to", "travelled to")
TAKE_VERBS: tuple[str, ...] = ("picked up", "grabbed", "took")
DROP_VERBS: tuple[str, ...] = ("dropped", "put down", "left")
NUMBER_WORDS: tuple[str, ...] = ("none", "one", "two", "three", "four", "five", "six")

VARIANTS: dict[str, dict[str, Any]] = {
    "babilong_qa1": {"objects": False, "facts": 8},
    "babilong_qa2": {"objects": True, "facts": 14},
    "babilong_qa3": {"objects": True, "facts": 20},
    "babilong_qa6": {"objects": False, "facts": 8},
    "babilong_qa7": {"objects": True, "facts": 14},
}


@dataclass
class World:
    """The simulated state: where people are, who holds what, where objects have been."""

    where: dict[str, str] = field(default_factory=dict)
    holder: dict[str, str] = field(default_factory=dict)
    floor: dict[str, str] = field(default_factory=dict)
    history: dict[str, list[str]] = field(default_factory=dict)

    def carried_by(self, person: str) -> list[str]:
        return [o for o, h in self.holder.items() if h == person]


def _step(
    rng: random.Random,
    world: World,
    people: list[str],
    places: list[str],
    objects: list[str],
    with_objects: bool,
) -> str:
    """Apply one random action to ``world`` and return its fact sentence."""
    located = [p for p in people if p in world.where]
    options = ["move"] * 3
    if with_objects and located:
        if any(
            o not in world.holder and world.floor.get(o, world.where[p]) == world.where[p]
            for p in located
            for o in objects
        ):
            options += ["take"] * 2
        if world.holder:
            options += ["drop"]
    action = rng.choice(options)
    if action == "take":
        pairs = [
            (p, o)
            for p in located
            for o in objects
            if o not in world.holder and world.floor.get(o, world.where[p]) == world.where[p]
        ]
        person, obj = rng.choice(pairs)
        world.holder[obj] = person
        world.floor.pop(obj, None)
        hist = world.history.setdefault(obj, [])
        if not hist or hist[-1] != world.where[person]:
            hist.append(world.where[person])
        return f"{person} {rng.choice(TAKE_VERBS)} the {obj}."
    if action == "drop":
        obj = rng.choice(sorted(world.holder))
        person = world.holder.pop(obj)
        world.floor[obj] = world.where[person]
        return f"{person} {rng.choice(DROP_VERBS)} the {obj}."
    person = rng.choice(people)
    place = rng.choice([p for p in places if p != world.where.get(person)])
    world.where[person] = place
    for obj in world.carried_by(person):
        world.history[obj].append(place)
    return f"{person} {rng.choice(MOVE_VERBS)} the {place}."


def _question(
    task: str,
    rng: random.Random,
    world: World,
    people: list[str],
    places: list[str],
    objects: list[str],
) -> tuple[str, tuple[str, ...]] | None:
    located = [p for p in people if p in world.where]
    if task == "babilong_qa1" and located:
        p = rng.choice(located)
        return f"Where is {p}?", (world.where[p],)
    if task == "babilong_qa6" and located:
        p = rng.choice(located)
        place = (
            world.where[p]
            if rng.random() < 0.5
            else rng.choice([x for x in places if x != world.where[p]])
        )
        return f"Is {p} in the {place}?", ("yes" if place == world.where[p] else "no",)
    if task == "babilong_qa2":
        known = [o for o in objects if o in world.history]
        if known:
            o = rng.choice(known)
            loc = world.where[world.holder[o]] if o in world.holder else world.floor[o]
            return f"Where is the {o}?", (loc,)
    if task == "babilong_qa3":
        ok = [o for o, h in world.history.items() if len(h) >= 2 and h[-1] not in h[:-1]]
        if ok:
            o = rng.choice(sorted(ok))
            h = world.history[o]
            return f"Where was the {o} before the {h[-1]}?", (h[-2],)
    if task == "babilong_qa7":
        holders = [p for p in located if world.carried_by(p)]
        pool = holders if holders and rng.random() < 0.7 else located
        if pool:
            p = rng.choice(pool)
            k = len(world.carried_by(p))
            return f"How many objects is {p} carrying?", (NUMBER_WORDS[k], str(k))
    return None


def story(task: str, rng: random.Random, num_facts: int) -> tuple[list[str], str, tuple[str, ...]]:
    """A story of ``num_facts`` facts, its question and answers (retried until answerable)."""
    spec = VARIANTS[task]
    for _ in range(1000):
        people = rng.sample(PEOPLE, 4)
        places = rng.sample(PLACES, 5)
        objects = rng.sample(OBJECTS, 3)
        world = World()
        facts = [
            _step(rng, world, people, places, objects, spec["objects"]) for _ in range(num_facts)
        ]
        qa = _question(task, rng, world, people, places, objects)
        if qa is not None:
            return facts, qa[0], qa[1]
    raise ValueError(
        f"could not build an answerable {task} story with {num_facts} facts"
    )  # pragma: no cover


def _make(task: str):  # type: ignore[no-untyped-def]
    def generate_babilong(
        n: int,
        length: int,
        seed: int,
        tokenizer: Any = None,
        *,
        num_facts: int = VARIANTS[task]["facts"],
    ) -> list[TaskItem]:
        check_int("num_facts", num_facts, 1)
        sizer = Sizer.of(tokenizer, length)

        def draft(rng: random.Random, index: int) -> Draft:
            facts, question, answers = story(task, rng, num_facts)
            depths = sorted(rng.random() for _ in facts)
            inserts = [Insert(f, d) for f, d in zip(facts, depths)]
            prompt = ItemPrompt(question)
            fitted = sizer.fit(essay_sentences(rng), inserts, prompt, what="the story facts")
            return Draft.of(
                fitted,
                prompt,
                answers,
                facts=facts,
                needles=facts,
                needle_offsets=list(fitted.offsets),
                depths=depths,
            )

        return sizer.items(task, n, seed, draft)

    generate_babilong.__name__ = task
    generate_babilong.__doc__ = (
        f"BABILong-style ``{task}``: bAbI-like facts scattered in essay text."
    )
    return generate_babilong


babilong_qa1 = _make("babilong_qa1")
babilong_qa2 = _make("babilong_qa2")
babilong_qa3 = _make("babilong_qa3")
babilong_qa6 = _make("babilong_qa6")
babilong_qa7 = _make("babilong_qa7")
