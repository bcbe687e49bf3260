"""Question answering over real prose, for memory agents, RAG and whole-document prompts.

The haystack is Python's own documentation as it ships inside CPython
(``pydoc_data.topics.topics``), read offline: its blocks in topic order, each distinct
block once. Prose paragraphs are reflowed and split into sentences; headings, code
samples, grammar rules, lists and tables stay whole and verbatim. Each item takes the
blocks from a seeded prose paragraph on, wrapping round to the first topic after the
last one, never using a block twice.

Facts about invented people, places and things (so world knowledge cannot answer them)
are planted at seeded depths, at boundaries between prose sentences (not after one
ending in a colon, which introduces what follows; never inside a code block, and next
to one only as a paragraph of its own where a two-hop fact has no other way to keep
its distance). Five kinds, each a task:

- ``docqa_single``: one fact, asked directly (the question shares its content words).
- ``docqa_reworded``: one fact from a bank of hand-written paraphrase templates; the
  question shares no content word with the fact (see :func:`content_words`).
- ``docqa_absent``: facts about other people of the same family, none about the asked
  person, whose names appear nowhere in the document; the right reply is to abstain.
- ``docqa_two_hop``: "A's cousin is B." and, at least 40% of the document away, "B
  works as a glassblower in Vessby."; the question names A only.
- ``docqa_count``: 2-5 events of one kind spread over the document; the answer is
  their count or the total of their quantities.

Every kind also plants same-family distractor facts about other entities, so matching
on the kind of fact alone does not find the answer. Unanswerable items carry
``answers=(ABSTAIN_ANSWER,)`` and ``metadata["answerable"] = False``; the ``docqa``
scorer accepts abstention there and counts it wrong everywhere else.

Item ``i`` depends only on (kind, seed, i), the options, the length and the Python
version (the documentation text differs between CPython releases; the version is
recorded in ``metadata["python_version"]``). The facts, questions and answers do not
depend on the length or the Python version, only the surrounding prose does.
"""

from __future__ import annotations

import bisect
import functools
import math
import platform
import random
import re
import textwrap
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from lc_evals.length import largest_fitting
from lc_evals.scorers import SCORERS, extract_answer, normalize
from lc_evals.tasks._common import Draft, ItemPrompt, Sizer
from lc_evals.types import TaskItem

KINDS: tuple[str, ...] = ("single", "reworded", "absent", "two_hop", "count")
"""The kinds of question; task ``docqa_<kind>`` generates each."""

TASKS: tuple[str, ...] = tuple(f"docqa_{k}" for k in KINDS)

ABSTAIN_ANSWER = "not found in the document"
"""The reference answer of unanswerable items (``metadata["answerable"] is False``)."""

MAX_DISTRACTORS = 5
"""Most distractor facts per item (the template pools hold six entries)."""

MIN_HOP_SEPARATION = 0.4
"""Least distance between the two facts of a two-hop item, as a fraction of the context."""

COUNT_MODES: tuple[str, ...] = ("count", "total")
"""``count``: how many events; ``total``: the sum of the quantities the events state."""

DOCQA_TEMPLATE = (
    "{context}\n\n"
    "Answer the question using only the document above. If the document does not "
    f'contain the answer, reply "{ABSTAIN_ANSWER}".\n\n'
    "Question: {question}"
)
"""A prompt template for :func:`lc_evals.run` (``template=DOCQA_TEMPLATE``) that tells the
model how to abstain."""

SOURCE = "pydoc_data.topics"

# --------------------------------------------------------------------------------------
# content words

_STOP_WORDS: tuple[str, ...] = (
    "about", "above", "across", "after", "again", "against", "all", "along", "also",
    "among", "and", "any", "are", "around", "away", "back", "because", "been", "before",
    "behind", "being", "below", "beneath", "beside", "besides", "between", "both", "but",
    "can", "could", "did", "does", "doing", "done", "down", "during", "each", "either",
    "else", "ever", "every", "few", "for", "from", "further", "had", "has", "have",
    "having", "her", "here", "hers", "herself", "him", "himself", "his", "how", "however",
    "into", "its", "itself", "just", "many", "may", "might", "more", "most", "much", "must",
    "near", "nor", "not", "now", "off", "once", "one", "only", "onto", "other", "others",
    "our", "ours", "out", "over", "own", "per", "quite", "rather", "same", "several", "she",
    "should", "since", "some", "such", "than", "that", "the", "their", "theirs", "them",
    "themselves", "then", "there", "these", "they", "this", "those", "though", "through",
    "thus", "till", "too", "toward", "towards", "under", "until", "upon", "very", "was",
    "were", "what", "whatever", "when", "where", "whether", "which", "while", "who", "whom",
    "whose", "why", "will", "with", "within", "without", "would", "yet", "you", "your",
    "yours",
)  # fmt: skip
STOP_WORDS: frozenset[str] = frozenset(_STOP_WORDS)
"""Function words ignored by :func:`content_words` (all of three letters or more)."""

_WORD = re.compile(r"[a-z0-9]+")


def content_words(text: str) -> frozenset[str]:
    """The content words of ``text``: lower-cased runs of letters and digits of three
    characters or more, a final plural ``s`` removed, stop words dropped.

    Examples:
        >>> sorted(content_words("The spare keys to Orlen's workshop hang behind it."))
        ['hang', 'key', 'orlen', 'spare', 'workshop']
    """
    out: set[str] = set()
    for word in _WORD.findall(text.lower()):
        if len(word) < 3 or word in STOP_WORDS:
            continue
        if len(word) > 3 and word.endswith("s") and not word.endswith("ss"):
            word = word[:-1]
        if word not in STOP_WORDS:
            out.add(word)
    return frozenset(out)


# --------------------------------------------------------------------------------------
# the haystack: Python's documentation


@dataclass(frozen=True)
class Paragraph:
    """One block of the documentation: its topic key, its sentences and whether it is
    prose.

    A prose paragraph is reflowed to one line and split into sentences; any other block
    (a heading, a code sample, a grammar rule, a list, a table) is one verbatim "sentence"
    with its line breaks; facts never go inside it.
    """

    topic: str
    sentences: tuple[str, ...]
    prose: bool

    @property
    def text(self) -> str:
        """The block as it appears in a context."""
        return " ".join(self.sentences)


_HEADING_RULE = re.compile(r"^[*=\-~^#+]{3,}$")
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[A-Z\"“(*])")
_ABBREVIATIONS: tuple[str, ...] = ("e.g.", "i.e.", "etc.", "vs.", "cf.", "Mr.", "Dr.", "No.")


def split_sentences(text: str) -> list[str]:
    """Split one line of prose after ``.``, ``!`` or ``?`` followed by a capital letter,
    a quote, a parenthesis or emphasis, but not after common abbreviations.

    Examples:
        >>> split_sentences("It runs, e.g. Fast. Then it stops! Done.")
        ['It runs, e.g. Fast.', 'Then it stops!', 'Done.']
    """
    out: list[str] = []
    current = ""
    pos = 0
    for match in _SENTENCE_END.finditer(text):
        current = f"{current} {text[pos : match.start()]}" if current else text[pos : match.start()]
        pos = match.end()
        if current.endswith(_ABBREVIATIONS):
            continue
        out.append(current)
        current = ""
    rest = text[pos:]
    out.append(f"{current} {rest}" if current else rest)
    return [s for s in out if s]


def _prose(block: str) -> str | None:
    """The block reflowed to one line if it is a prose paragraph, else ``None``."""
    block = textwrap.dedent(block).strip("\n")
    lines = block.split("\n")
    if any(_HEADING_RULE.match(line.strip()) for line in lines):
        return None
    if any(line.startswith((" ", "\t")) for line in lines):
        return None  # code, grammar productions, nested lists, tables
    if ">>>" in block or "::=" in block:
        return None
    text = " ".join(block.split())
    if len(text.split()) < 8 or not text.endswith((".", ":", "?", "!", ")")):
        return None
    if not re.match(r"[A-Z\"“*(]", text):
        return None  # signatures such as "str.split(sep=None)"
    return text


@functools.cache
def doc_paragraphs() -> tuple[Paragraph, ...]:
    """The blocks of ``pydoc_data.topics``, topics in sorted order, each block once
    (cached).

    On CPython 3.11: about 2,100 distinct blocks and 360,000 characters (some 85K tokens
    of SmolLM2's tokenizer), two thirds of them in prose paragraphs.
    """
    from pydoc_data.topics import topics

    seen: set[str] = set()
    out: list[Paragraph] = []
    for topic in sorted(topics):
        for block in re.split(r"\n[ \t]*\n", topics[topic]):
            verbatim = block.strip("\n").rstrip()
            key = " ".join(verbatim.split())
            if not key or key in seen:
                continue
            seen.add(key)
            text = _prose(block)
            if text is None:
                out.append(Paragraph(topic=topic, sentences=(verbatim,), prose=False))
            else:
                out.append(
                    Paragraph(topic=topic, sentences=tuple(split_sentences(text)), prose=True)
                )
    if not any(p.prose for p in out):
        raise RuntimeError("pydoc_data.topics holds no prose paragraphs")
    return tuple(out)


# --------------------------------------------------------------------------------------
# invented entities (none of these words occurs in the documentation text)

FIRST_NAMES: tuple[str, ...] = (
    "Mara", "Tobin", "Orlen", "Ilse", "Bexa", "Corvin", "Dessa", "Fenna", "Garrick",
    "Halvard", "Isolde", "Jory", "Kessa", "Lorcan", "Mirela", "Nesta", "Osric", "Perrin",
    "Quilla", "Rurik", "Selka", "Tamsin", "Ulric", "Vanya", "Wrenna", "Yselle", "Zoran",
    "Albin", "Brisa", "Edda",
)  # fmt: skip
SURNAMES: tuple[str, ...] = (
    "Quell", "Asher", "Varn", "Corlett", "Dunmore", "Elsworth", "Farrow", "Grindle",
    "Hollis", "Ibbott", "Jessop", "Kettleby", "Lasker", "Marwood", "Pellow", "Quinnet",
    "Rundle", "Stroud", "Thackery", "Vantry", "Wexley", "Yarrow", "Brackett", "Cobbold",
    "Drummond", "Fairlie", "Gorringe", "Hesketh", "Ormsby", "Pruett",
)  # fmt: skip
TOWNS: tuple[str, ...] = (
    "Vessby", "Ilsby", "Dornholt", "Quarrow", "Brennick", "Ostrell", "Tellwick",
    "Haverlund", "Skellan", "Marrowick", "Fennmoor", "Caldrith", "Lindqvale", "Orrisford",
    "Pelterby", "Rookhaven", "Sallowmere", "Thornquist", "Umberlow", "Wendlecott",
    "Kettridge", "Glimmerton", "Brackenfold", "Harrowdene",
)  # fmt: skip
PET_NAMES: tuple[str, ...] = (
    "Mosswick", "Tamsel", "Quenby", "Wimble", "Figlet", "Dapplin", "Brisko", "Zephrin",
    "Lolloway", "Crumbert",
)  # fmt: skip
COLOURS: tuple[str, ...] = (
    "crimson", "teal", "ochre", "violet", "amber", "turquoise", "maroon", "indigo",
)  # fmt: skip
WEEKDAYS: tuple[str, ...] = (
    "Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday",
)  # fmt: skip


def _people(rng: random.Random, count: int) -> list[str]:
    """``count`` invented full names, no first name or surname used twice."""
    firsts = rng.sample(FIRST_NAMES, count)
    lasts = rng.sample(SURNAMES, count)
    return [f"{f} {s}" for f, s in zip(firsts, lasts, strict=True)]


# --------------------------------------------------------------------------------------
# fact families: single, absent and the second hop of two_hop


@dataclass(frozen=True)
class FactFamily:
    """A fact about a person and the direct question about it.

    ``fact`` has the slots ``{who}`` and ``{answer}``; ``question`` has ``{who}``, which
    may also be a phrase such as ``"Mara Quell's cousin"`` (two-hop questions).
    """

    name: str
    fact: str
    question: str
    answers: tuple[str, ...]

    def __post_init__(self) -> None:
        if "{who}" not in self.fact or "{answer}" not in self.fact:
            raise ValueError(f"FactFamily {self.name!r}: fact needs {{who}} and {{answer}}")
        if "{who}" not in self.question or "{answer}" in self.question:
            raise ValueError(f"FactFamily {self.name!r}: question needs {{who}} and no answer")
        if len(set(self.answers)) < MAX_DISTRACTORS + 1:
            raise ValueError(
                f"FactFamily {self.name!r}: answers needs >= {MAX_DISTRACTORS + 1} distinct "
                f"values, got {len(set(self.answers))}"
            )

    def fact_text(self, who: str, answer: str) -> str:
        """The fact sentence."""
        return self.fact.format(who=who, answer=answer)

    def question_text(self, who: str) -> str:
        """The question about ``who``."""
        return self.question.format(who=who)


_INSTRUMENTS = ("cello", "oboe", "harp", "bassoon", "banjo", "accordion", "marimba", "zither")
_LOCKERS = ("214", "387", "452", "519", "638", "761", "823", "905")

FACT_FAMILIES: tuple[FactFamily, ...] = (
    FactFamily(
        "rowing_boat",
        "{who} keeps a rowing boat at the harbour of {answer}.",
        "At the harbour of which town does {who} keep a rowing boat?",
        TOWNS[:8],
    ),
    FactFamily(
        "birthplace",
        "{who} was born in the mountain village of {answer}.",
        "In which mountain village was {who} born?",
        TOWNS[8:16],
    ),
    FactFamily(
        "locker",
        "The locker assigned to {who} at the swimming baths is number {answer}.",
        "What is the number of the locker assigned to {who} at the swimming baths?",
        _LOCKERS,
    ),
    FactFamily(
        "parrot",
        "{who} owns a grey parrot called {answer}.",
        "What is the grey parrot that {who} owns called?",
        PET_NAMES,
    ),
    FactFamily(
        "instrument",
        "{who} plays the {answer} in the river orchestra.",
        "Which instrument does {who} play in the river orchestra?",
        _INSTRUMENTS,
    ),
    FactFamily(
        "garden_shed",
        "{who} painted the garden shed {answer} last spring.",
        "What colour did {who} paint the garden shed last spring?",
        COLOURS,
    ),
    FactFamily(
        "glassblower",
        "{who} works as a glassblower in {answer}.",
        "In which town does {who} work as a glassblower?",
        TOWNS[16:24],
    ),
    FactFamily(
        "dog",
        "{who} walks a dog named {answer} every morning.",
        "What is the name of the dog that {who} walks every morning?",
        PET_NAMES[::-1],
    ),
    FactFamily(
        "station_clock",
        "{who} repaired the station clock in {answer}.",
        "In which town did {who} repair the station clock?",
        TOWNS[4:12],
    ),
    FactFamily(
        "bicycle",
        "{who} rides a {answer} bicycle to the market.",
        "What colour is the bicycle that {who} rides to the market?",
        COLOURS[::-1],
    ),
)
"""Families of directly asked facts (``single``, ``absent`` and the second hop)."""

RELATIONS: tuple[str, ...] = (
    "cousin", "neighbour", "landlord", "business partner", "flatmate", "godparent",
    "apprentice", "employer",
)  # fmt: skip
"""Relations of the first hop: ``"{a}'s {relation} is {b}."``."""


def relation_text(who: str, relation: str, other: str) -> str:
    """The first-hop sentence of a two-hop item.

    Examples:
        >>> relation_text("Mara Quell", "cousin", "Tobin Asher")
        "Mara Quell's cousin is Tobin Asher."
    """
    return f"{who}'s {relation} is {other}."


# --------------------------------------------------------------------------------------
# the paraphrase bank of ``reworded``


@dataclass(frozen=True)
class RewordedTemplate:
    """A fact and a question about it that share no content word.

    ``fact`` has the slots ``{name}`` (an invented person, never asked about), ``{x}``
    (the fact-side word of a pair) and ``{answer}``; ``question`` has ``{q}`` only, the
    question-side word of the same pair. Distractors use the other pairs, so the
    question picks its fact by meaning, not by any shared word.
    """

    name: str
    fact: str
    question: str
    pairs: tuple[tuple[str, str], ...]
    answers: tuple[str, ...]

    def __post_init__(self) -> None:
        for slot in ("{name}", "{x}", "{answer}"):
            if slot not in self.fact:
                raise ValueError(f"RewordedTemplate {self.name!r}: fact needs {slot}")
        if "{q}" not in self.question or "{" in self.question.replace("{q}", ""):
            raise ValueError(f"RewordedTemplate {self.name!r}: question takes {{q}} only")
        if len(set(self.pairs)) < MAX_DISTRACTORS + 1:
            raise ValueError(
                f"RewordedTemplate {self.name!r}: pairs needs >= {MAX_DISTRACTORS + 1} entries"
            )
        if len(set(self.answers)) < MAX_DISTRACTORS + 1:
            raise ValueError(
                f"RewordedTemplate {self.name!r}: answers needs >= {MAX_DISTRACTORS + 1} entries"
            )

    def fact_text(self, name: str, pair: int, answer: str) -> str:
        """The fact with pair ``pair``'s fact-side word."""
        return self.fact.format(name=name, x=self.pairs[pair][0], answer=answer)

    def question_text(self, pair: int) -> str:
        """The question with pair ``pair``'s question-side word."""
        return self.question.format(q=self.pairs[pair][1])


TRADES = (
    ("pottery", "ceramics"), ("carpentry", "joinery"), ("tailoring", "dressmaking"),
    ("printing", "typesetting"), ("jewellery", "goldsmithing"), ("leatherwork", "saddlery"),
)  # fmt: skip
JOBS = (
    ("doctor", "physician"), ("lawyer", "attorney"), ("cook", "chef"),
    ("sailor", "mariner"), ("pilot", "aviator"), ("teacher", "tutor"),
)  # fmt: skip
VEHICLES = (
    ("car", "automobile"), ("bicycle", "bike"), ("truck", "lorry"),
    ("motorcycle", "motorbike"), ("scooter", "moped"), ("minibus", "coach"),
)  # fmt: skip
BUILDINGS = (
    ("shop", "store"), ("hospital", "clinic"), ("school", "academy"),
    ("theatre", "playhouse"), ("hotel", "inn"), ("museum", "gallery"),
)  # fmt: skip
ANIMALS = (
    ("dog", "hound"), ("rabbit", "bunny"), ("hen", "chicken"),
    ("pig", "hog"), ("cat", "feline"), ("donkey", "burro"),
)  # fmt: skip
ROOMS = (
    ("cellar", "basement"), ("attic", "loft"), ("hallway", "corridor"),
    ("bathroom", "washroom"), ("lounge", "parlour"), ("pantry", "larder"),
)  # fmt: skip
FOODS = (
    ("soup", "broth"), ("jam", "preserve"), ("stew", "casserole"),
    ("chutney", "relish"), ("porridge", "oatmeal"), ("pudding", "dessert"),
)  # fmt: skip
GARMENTS = (
    ("sweater", "jumper"), ("scarf", "muffler"), ("raincoat", "mackintosh"),
    ("waistcoat", "vest"), ("shawl", "wrap"), ("bonnet", "hat"),
)  # fmt: skip
FURNITURE = (
    ("sofa", "couch"), ("wardrobe", "closet"), ("cupboard", "cabinet"),
    ("bookcase", "bookshelf"), ("desk", "bureau"), ("armchair", "easy chair"),
)  # fmt: skip
CONTAINERS = (
    ("bucket", "pail"), ("suitcase", "valise"), ("bottle", "flask"),
    ("box", "carton"), ("jug", "pitcher"), ("barrel", "cask"),
)  # fmt: skip

_BEHIND = ("calendar", "mirror", "curtain", "radiator", "painting", "clock")
_INSIDE = ("teapot", "drawer", "shoebox", "vase", "toolbox", "breadbin")
_BESIDE = ("fireplace", "piano", "window", "staircase", "aquarium", "dresser")
_UNDER = ("rug", "floorboard", "flowerpot", "doormat", "mattress", "cushion")
_OUTDOOR = ("porch", "hedge", "wheelbarrow", "woodpile", "birdbath", "rosebush")
_BARN = ("ladder", "workbench", "tarpaulin", "trough", "plough", "haystack")
_ON = ("bench", "counter", "windowsill", "luggage rack", "ticket desk", "newsstand")
_WOODS = ("oak", "walnut", "pine", "teak", "birch", "maple")
_ROOFS = ("slate", "copper", "thatch", "zinc", "shingle", "turf")
_FLOORS = ("slate", "marble", "cork", "terracotta", "bamboo", "limestone")
_METALS = ("tin", "copper", "clay", "glass", "pewter", "enamel")
_SPICES = ("ginger", "nutmeg", "cinnamon", "clove", "cardamom", "paprika")
_FODDER = ("turnips", "barley", "clover", "oats", "parsnips", "acorns")
_FABRICS = ("linen", "tweed", "corduroy", "velvet", "denim", "flannel")

REWORDED_BANK: tuple[RewordedTemplate, ...] = (
    RewordedTemplate(
        "spare_key",
        "The spare key to {name}'s {x} workshop hangs behind the {answer}.",
        "Where is the extra way to unlock the {q} studio kept?",
        TRADES,
        _BEHIND,
    ),
    RewordedTemplate(
        "front_door",
        "{name} painted the front door of the {x} {answer}.",
        "Which hue was chosen for the entrance to the {q}?",
        BUILDINGS,
        COLOURS,
    ),
    RewordedTemplate(
        "adopted_pet",
        "{name} adopted a {x} and called it {answer}.",
        "What is the rescued {q}'s given name?",
        ANIMALS,
        PET_NAMES,
    ),
    RewordedTemplate(
        "adviser_moved",
        "The {x} who advised {name} last winter has moved to {answer}.",
        "Which town is now home to the {q} that counselled this client during the cold season?",
        JOBS,
        TOWNS[:6],
    ),
    RewordedTemplate(
        "used_vehicle",
        "{name} bought a second-hand {x} with {answer} paint.",
        "What shade is the used {q} purchased by this owner?",
        VEHICLES,
        COLOURS,
    ),
    RewordedTemplate(
        "hidden_ring",
        "{name} hid the wedding ring under the {answer} in the {x}.",
        "Beneath which object in the {q} was the marriage band concealed?",
        ROOMS,
        _UNDER,
    ),
    RewordedTemplate(
        "fair_prize",
        "{name} won first prize for {x} at the {answer} fair.",
        "At which town's show did the champion {q} get its award?",
        FOODS,
        TOWNS[6:12],
    ),
    RewordedTemplate(
        "flat_furniture",
        "The {x} in {name}'s flat is made of {answer}.",
        "What material was used to build the {q} in that apartment?",
        FURNITURE,
        _WOODS,
    ),
    RewordedTemplate(
        "harvest_dance",
        "{name} wore a {answer} {x} to the harvest dance.",
        "What shade was the {q} chosen for the crop festival ball?",
        GARMENTS,
        COLOURS,
    ),
    RewordedTemplate(
        "seed_store",
        "{name} keeps the {x} of seed beside the {answer}.",
        "Next to which item is the {q} containing grain stored?",
        CONTAINERS,
        _BESIDE,
    ),
    RewordedTemplate(
        "apprenticeship",
        "{name} learned {x} from an old master in {answer}.",
        "In which town was the {q} apprenticeship served?",
        TRADES,
        TOWNS[12:18],
    ),
    RewordedTemplate(
        "weekly_visit",
        "The {x} visits {name} every {answer}.",
        "On which weekday does the {q} come round to see them?",
        JOBS,
        WEEKDAYS,
    ),
    RewordedTemplate(
        "small_business",
        "{name} manages a small {x} in {answer}.",
        "Where is the little {q} run by this proprietor located?",
        BUILDINGS,
        TOWNS[18:24],
    ),
    RewordedTemplate(
        "collar",
        "{name}'s {x} wears a {answer} collar.",
        "What shade is the band around the neck of the {q}?",
        ANIMALS,
        COLOURS[::-1],
    ),
    RewordedTemplate(
        "parked_vehicle",
        "{name} left the {x} parked outside the station at {answer}.",
        "At which town's railway depot was the {q} abandoned?",
        VEHICLES,
        TOWNS[3:9],
    ),
    RewordedTemplate(
        "cottage_walls",
        "The walls of the {x} in {name}'s cottage are painted {answer}.",
        "What hue covers the sides of the {q} at that country house?",
        ROOMS,
        COLOURS,
    ),
    RewordedTemplate(
        "seasoning",
        "{name}'s famous {x} is seasoned with {answer}.",
        "Which spice gives the celebrated {q} its taste?",
        FOODS,
        _SPICES,
    ),
    RewordedTemplate(
        "tortoise",
        "The {x} who lives next door to {name} has a tortoise called {answer}.",
        "What is the reptile owned by the neighbouring {q} named?",
        JOBS,
        PET_NAMES,
    ),
    RewordedTemplate(
        "auction",
        "{name} bought the antique {x} at an auction in {answer}.",
        "Where was the vintage {q} acquired through bidding?",
        FURNITURE,
        TOWNS[9:15],
    ),
    RewordedTemplate(
        "present",
        "{name} made a {x} for a cousin living in {answer}.",
        "Where does the relative who received the {q} as a gift reside?",
        GARMENTS,
        TOWNS[15:21],
    ),
    RewordedTemplate(
        "water_carrier",
        "The {x} that {name} carries to the well is made of {answer}.",
        "What substance forms the {q} brought along to fetch water?",
        CONTAINERS,
        _METALS,
    ),
    RewordedTemplate(
        "closing_day",
        "{name}'s {x} workshop is closed on {answer}.",
        "Which day does the {q} studio shut its doors?",
        TRADES,
        WEEKDAYS,
    ),
    RewordedTemplate(
        "extinguisher",
        "The {x} where {name} works keeps its fire extinguisher behind the {answer}.",
        "Where is the safety device for putting out flames stored at the {q} employing this person?",
        BUILDINGS,
        _BEHIND,
    ),
    RewordedTemplate(
        "breeder",
        "{name} bought a {x} from a breeder in {answer}.",
        "In which town did this owner purchase the {q}?",
        ANIMALS,
        TOWNS[:6],
    ),
    RewordedTemplate(
        "vehicle_keys",
        "{name} keeps the {x} keys inside the {answer}.",
        "Where are the means of starting the {q} stored?",
        VEHICLES,
        _INSIDE,
    ),
    RewordedTemplate(
        "sleeping_cat",
        "A cat named {answer} sleeps in {name}'s {x}.",
        "What is the feline dozing in the {q} called?",
        ROOMS,
        PET_NAMES,
    ),
    RewordedTemplate(
        "market_stall",
        "{name} sells homemade {x} at the market in {answer}.",
        "In which town's bazaar can one buy the {q} this vendor prepares?",
        FOODS,
        TOWNS[18:24],
    ),
    RewordedTemplate(
        "photographs",
        "{name} stores the family photographs in the {x} next to the {answer}.",
        "The household pictures are kept in the {q} beside what?",
        FURNITURE,
        _BESIDE,
    ),
    RewordedTemplate(
        "garment_fabric",
        "{name}'s {x} is sewn from {answer}.",
        "Which textile was the {q} stitched out of?",
        GARMENTS,
        _FABRICS,
    ),
    RewordedTemplate(
        "apples",
        "{name} shipped a {x} of apples to an aunt in {answer}.",
        "Where does the relative who got the {q} of fruit live?",
        CONTAINERS,
        TOWNS[6:12],
    ),
    RewordedTemplate(
        "lodger_van",
        "The {x} who lodges with {name} drives a {answer} van.",
        "What shade is the vehicle of the {q} renting a room there?",
        JOBS,
        COLOURS[::-1],
    ),
    RewordedTemplate(
        "late_opening",
        "The {x} on {name}'s street opens late on {answer}.",
        "Which day does the {q} along that road keep extended hours?",
        BUILDINGS,
        WEEKDAYS,
    ),
    RewordedTemplate(
        "nap_spot",
        "{name}'s {x} likes to nap under the {answer}.",
        "Beneath what does the {q} enjoy dozing?",
        ANIMALS,
        _OUTDOOR,
    ),
    RewordedTemplate(
        "washing_day",
        "{name} washes the {x} every {answer}.",
        "On which day of the week is the {q} cleaned?",
        VEHICLES,
        WEEKDAYS,
    ),
    RewordedTemplate(
        "floor",
        "The floor of the {x} in {name}'s house is laid with {answer}.",
        "What covers the ground surface of the {q}?",
        ROOMS,
        _FLOORS,
    ),
    RewordedTemplate(
        "neighbours_meal",
        "{name} makes {x} for the neighbours every {answer}.",
        "Which day of the week does the {q} get prepared for the people nearby?",
        FOODS,
        WEEKDAYS,
    ),
    RewordedTemplate(
        "repainted",
        "{name} repainted the {x} {answer} over the weekend.",
        "What shade was the {q} given during the recent Saturday and Sunday?",
        FURNITURE,
        COLOURS,
    ),
    RewordedTemplate(
        "ferry_terminal",
        "{name} left a {x} on the {answer} at the ferry terminal.",
        "Where was the forgotten {q} spotted at the boat port?",
        GARMENTS,
        _ON,
    ),
    RewordedTemplate(
        "lamp_oil",
        "The {x} of lamp oil is stored beneath the {answer} in {name}'s barn.",
        "Under what is the {q} of fuel kept in that farm building?",
        CONTAINERS,
        _BARN,
    ),
    RewordedTemplate(
        "wedding_suit",
        "The {x} who married {name} wore a suit of {answer}.",
        "Which textile was the outfit of the {q} spouse made from at the wedding?",
        JOBS,
        _FABRICS,
    ),
    RewordedTemplate(
        "workshop_sign",
        "The sign above {name}'s {x} workshop is painted {answer}.",
        "What shade is the board hanging over the {q} studio?",
        TRADES,
        COLOURS[::-1],
    ),
    RewordedTemplate(
        "roof",
        "The roof of the {x} that {name} owns is covered with {answer}.",
        "What material tops the {q} belonging to this proprietor?",
        BUILDINGS,
        _ROOFS,
    ),
    RewordedTemplate(
        "diet",
        "{name}'s {x} eats only {answer}.",
        "What is the sole diet of the {q}?",
        ANIMALS,
        _FODDER,
    ),
    RewordedTemplate(
        "cleaning_day",
        "{name} cleans the {x} every {answer}.",
        "Which day of the week is the {q} tidied?",
        ROOMS,
        WEEKDAYS,
    ),
)
"""Hand-written paraphrase templates of ``reworded`` (44)."""


# --------------------------------------------------------------------------------------
# count families


@dataclass(frozen=True)
class CountFamily:
    """An event that happens on several days, and the questions that add it up.

    Slots: ``{k1}`` (goods or a person), ``{k2}`` (a town), ``{day}`` and, in
    ``total_fact``, ``{qty}``. ``count_question`` asks how many events there were,
    ``total_question`` the sum of their quantities.
    """

    name: str
    count_fact: str
    total_fact: str
    count_question: str
    total_question: str
    k1: tuple[str, ...] | None  # None: invented people

    def fact_text(self, mode: str, k1: str, k2: str, day: str, qty: int) -> str:
        """One event sentence (``qty`` is ignored in ``count`` mode)."""
        template = self.count_fact if mode == "count" else self.total_fact
        return template.format(k1=k1, k2=k2, day=day, qty=qty)

    def question_text(self, mode: str, k1: str, k2: str) -> str:
        """The question of ``mode`` about the events of ``(k1, k2)``."""
        template = self.count_question if mode == "count" else self.total_question
        return template.format(k1=k1, k2=k2)


GOODS: tuple[str, ...] = (
    "copper nails", "lamp oil", "rye flour", "slate tiles", "wool yarn", "tin buckets",
    "candle wax",
)  # fmt: skip

COUNT_FAMILIES: tuple[CountFamily, ...] = (
    CountFamily(
        "crates",
        "A crate of {k1} was delivered to the {k2} depot on {day}.",
        "On {day}, {qty} crates of {k1} were delivered to the {k2} depot.",
        "How many crates of {k1} were delivered to the {k2} depot?",
        "How many crates of {k1} were delivered to the {k2} depot in total?",
        GOODS,
    ),
    CountFamily(
        "recitals",
        "{k1} gave a violin recital at the {k2} town hall on {day}.",
        "On {day}, {k1} played {qty} sonatas at the {k2} town hall.",
        "How many violin recitals did {k1} give at the {k2} town hall?",
        "How many sonatas did {k1} play at the {k2} town hall in total?",
        None,
    ),
    CountFamily(
        "pike",
        "{k1} caught a pike in Lake {k2} on {day}.",
        "On {day}, {k1} caught {qty} pike in Lake {k2}.",
        "How many pike did {k1} catch in Lake {k2}?",
        "How many pike did {k1} catch in Lake {k2} in total?",
        None,
    ),
    CountFamily(
        "parcels",
        "{k1} posted a parcel to a friend in {k2} on {day}.",
        "On {day}, {k1} posted {qty} parcels to friends in {k2}.",
        "How many parcels did {k1} post to friends in {k2}?",
        "How many parcels did {k1} post to friends in {k2} in total?",
        None,
    ),
)
"""Families of counted events (``count``)."""

_UNITS: tuple[str, ...] = (
    "zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten",
    "eleven", "twelve", "thirteen", "fourteen", "fifteen", "sixteen", "seventeen",
    "eighteen", "nineteen",
)  # fmt: skip
_TENS: tuple[str, ...] = (
    "", "", "twenty", "thirty", "forty", "fifty", "sixty", "seventy", "eighty", "ninety",
)  # fmt: skip


def number_words(value: int) -> str:
    """English words of ``0 <= value < 100``.

    Examples:
        >>> number_words(7), number_words(23), number_words(40)
        ('seven', 'twenty-three', 'forty')
    """
    if not 0 <= value < 100:
        raise ValueError(f"value must be in [0, 100), got {value}")
    if value < 20:
        return _UNITS[value]
    tens, units = divmod(value, 10)
    return _TENS[tens] + (f"-{_UNITS[units]}" if units else "")


def number_answers(value: int) -> tuple[str, ...]:
    """Every accepted spelling of a count: digits, words, words without the hyphen."""
    words = number_words(value)
    return tuple(dict.fromkeys((str(value), words, words.replace("-", " "))))


# --------------------------------------------------------------------------------------
# configuration


@dataclass(frozen=True)
class DocQAConfig:
    """Options of :func:`docqa`, validated on construction.

    Attributes:
        kind: one of :data:`KINDS`.
        distractors: same-family facts about other entities, 0 to
            :data:`MAX_DISTRACTORS` (``absent`` needs at least 1). In ``two_hop`` they
            are, in turn: another relation of the asked person, that person's fact of
            the asked family, the asked relation of another person, that person's fact.
            In ``count`` they share the goods/person or the town of the counted events,
            or neither, in turn.
        depth: where the (first) fact goes, as a fraction of the prose before it (0-1);
            ``None`` draws it from the item's seed. Only ``single``, ``reworded`` and
            ``two_hop`` (the relation fact) take it.
        facts: ``count`` only: the number of counted events (2-5), ``None`` = seeded.
        mode: ``count`` only: ``"count"``, ``"total"`` or ``None`` (seeded).
    """

    kind: str = "single"
    distractors: int = 3
    depth: float | None = None
    facts: int | None = None
    mode: str | None = None

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"kind must be one of {list(KINDS)}, got {self.kind!r}")
        d = self.distractors
        if not isinstance(d, int) or isinstance(d, bool) or not 0 <= d <= MAX_DISTRACTORS:
            raise ValueError(f"distractors must be an integer in [0, {MAX_DISTRACTORS}], got {d!r}")
        if self.kind == "absent" and d < 1:
            raise ValueError(
                "distractors must be >= 1 for kind 'absent' (the document must hold facts "
                f"about other entities), got {d}"
            )
        if self.depth is not None:
            if self.kind not in ("single", "reworded", "two_hop"):
                raise ValueError(
                    f"depth applies to kinds single, reworded and two_hop, not {self.kind!r}"
                )
            if (
                isinstance(self.depth, bool)
                or not isinstance(self.depth, int | float)
                or not 0.0 <= float(self.depth) <= 1.0
            ):
                raise ValueError(
                    f"depth must be a float in [0, 1] or None (seeded), got {self.depth!r}"
                )
        if self.facts is not None:
            if self.kind != "count":
                raise ValueError(f"facts applies to kind 'count' only, not {self.kind!r}")
            f = self.facts
            if not isinstance(f, int) or isinstance(f, bool) or not 2 <= f <= 5:
                raise ValueError(f"facts must be an integer in [2, 5] or None, got {f!r}")
        if self.mode is not None:
            if self.kind != "count":
                raise ValueError(f"mode applies to kind 'count' only, not {self.kind!r}")
            if self.mode not in COUNT_MODES:
                raise ValueError(
                    f"mode must be one of {list(COUNT_MODES)} or None, got {self.mode!r}"
                )


# --------------------------------------------------------------------------------------
# placing facts and fitting the document


@dataclass(frozen=True)
class _Plant:
    """A planted sentence; ``apart_from`` names an earlier plant it must stay
    ``min_gap`` away from (a fraction of the characters of the prose and plants)."""

    text: str
    depth: float
    apart_from: int | None = None
    min_gap: float = 0.0


@dataclass(frozen=True)
class _Document:
    context: str
    length: int
    offsets: tuple[int, ...]
    filler_chars: int
    paragraphs: int


def _nearest(bounds: Sequence[int], lo: int, hi: int, target: float) -> int:
    """Index in ``[lo, hi)`` of the sorted ``bounds`` nearest ``target`` (lower on ties)."""
    j = bisect.bisect_left(bounds, target, lo, hi)
    best = None
    for k in (j - 1, j):
        if lo <= k < hi and (best is None or abs(bounds[k] - target) < abs(bounds[best] - target)):
            best = k
    assert best is not None
    return best


_Tier = tuple[list[int], list[int]]  # boundary indices and their char offsets, sorted


def _pick(
    tier: _Tier, target: float, lo: float | None = None, hi: float | None = None
) -> int | None:
    """The boundary of ``tier`` nearest ``target`` among those at or below ``lo`` or at or
    above ``hi`` (all of them when both are ``None``); ``None`` if there is none."""
    idx, pos = tier
    if lo is None or hi is None:
        return idx[_nearest(pos, 0, len(pos), target)] if pos else None
    left = bisect.bisect_right(pos, lo)  # pos[:left] <= lo
    right = bisect.bisect_left(pos, hi)  # pos[right:] >= hi
    options = []
    if left > 0:
        options.append(_nearest(pos, 0, left, target))
    if right < len(pos):
        options.append(_nearest(pos, right, len(pos), target))
    if not options:
        return None
    return idx[min(options, key=lambda j: (abs(pos[j] - target), j))]


def _place(open_tier: _Tier, block_tier: _Tier, total: int, plants: Sequence[_Plant]) -> list[int]:
    """The boundary index of every plant, nearest ``depth * total`` among the open
    boundaries (``total``: characters of the document without the plants). A plant with
    ``apart_from`` takes the nearest open boundary far enough from that plant, else the
    nearest such block boundary, else the farthest one."""
    planted = sum(len(p.text) + 2 for p in plants)
    offset = dict(zip(block_tier[0], block_tier[1], strict=True))
    offset.update(zip(open_tier[0], open_tier[1], strict=True))
    slots: list[int] = []
    for plant in plants:
        target = plant.depth * total
        if plant.apart_from is None:
            slot = _pick(open_tier, target)
            assert slot is not None
            slots.append(slot)
            continue
        ref = offset[slots[plant.apart_from]]
        gap = plant.min_gap * (total + planted)
        slot = _pick(open_tier, target, ref - gap, ref + gap)
        if slot is None:
            slot = _pick(block_tier, target, ref - gap, ref + gap)
        if slot is None:  # too little text: the farthest block boundary
            idx, pos = block_tier
            slot = idx[0] if abs(pos[0] - ref) >= abs(pos[-1] - ref) else idx[-1]
        slots.append(slot)
    return slots


class _Haystack:
    """The sentences of a run of paragraphs and the texts built from their prefixes.

    Facts go at *open* boundaries: the start, and before a prose sentence that follows
    a prose sentence not ending in a colon (which introduces what follows). A fact that
    must keep its distance from another and finds no open boundary far enough may take
    any paragraph break instead.
    """

    def __init__(self, paragraphs: Sequence[Paragraph], plants: Sequence[_Plant]) -> None:
        self.plants = plants
        self.flat: list[tuple[int, str, bool]] = [
            (p, s, para.prose) for p, para in enumerate(paragraphs) for s in para.sentences
        ]
        self.starts: list[int] = []  # offset of each sentence in the text without plants
        self.open: list[bool] = []  # may a fact go right before sentence i?
        pos = 0
        for i, (p, s, prose) in enumerate(self.flat):
            if i:
                pos += 1 if p == self.flat[i - 1][0] else 2
            self.starts.append(pos)
            pos += len(s)
            before = i == 0 or (self.flat[i - 1][2] and not self.flat[i - 1][1].endswith(":"))
            self.open.append(prose and before)

    def __len__(self) -> int:
        return len(self.flat)

    def _tiers(self, k: int) -> tuple[_Tier, _Tier, int]:
        """Boundaries among the first ``k`` sentences where a fact may go: the open ones
        (the start, and between prose sentences, the end too if it follows one) and the
        block ones (the start, the end and every paragraph break), with their offsets in
        the text without plants; and that text's length."""
        if k == 0:
            return ([0], [0]), ([0], [0]), 0
        flat, starts = self.flat, self.starts
        last = flat[k - 1]
        end = starts[k - 1] + len(last[1])
        opened = [0, *(i for i in range(1, k) if self.open[i])]
        if last[2] and not last[1].endswith(":"):
            opened.append(k)
        blocks = [0, *(i for i in range(1, k) if flat[i][0] != flat[i - 1][0]), k]

        def at(idx: list[int]) -> _Tier:
            return idx, [starts[i] if i < k else end for i in idx]

        return at(opened), at(blocks), end

    def build(self, k: int, tail_chars: int = 0) -> tuple[str, tuple[int, ...], int]:
        """Text of the first ``k`` sentences (plus the first ``tail_chars`` characters of
        the next one) with the plants spliced in; the plants' offsets; the blocks used."""
        flat = self.flat
        open_tier, block_tier, total = self._tiers(k)
        tail = flat[k][1][:tail_chars] if tail_chars else ""
        total += len(tail) + 2 * bool(tail)  # depths are fractions of all the prose
        slots = _place(open_tier, block_tier, total, self.plants)
        at: dict[int, list[int]] = {}
        order = sorted(range(len(self.plants)), key=lambda i: (slots[i], self.plants[i].depth, i))
        for i in order:
            at.setdefault(slots[i], []).append(i)
        pieces: list[tuple[str, int, int]] = []  # (text, paragraph, plant index or -1)
        for i in range(k + 1):
            # a plant opens the prose paragraph after it, else ends the prose one before
            # it, else (beside a code block or after a colon) stands as its own paragraph
            if i < k and flat[i][2]:
                para = flat[i][0]
            elif i and flat[i - 1][2] and not flat[i - 1][1].endswith(":"):
                para = flat[i - 1][0]
            else:
                para = -1 - i
            for j in at.get(i, ()):
                pieces.append((self.plants[j].text, para, j))
            if i < k:
                pieces.append((flat[i][1], flat[i][0], -1))
        if tail:
            pieces.append((tail, flat[k][0], -1))
        out: list[str] = []
        offsets = [0] * len(self.plants)
        pos = 0
        for n, (text, para, j) in enumerate(pieces):
            if n:
                sep = " " if para == pieces[n - 1][1] else "\n\n"
                out.append(sep)
                pos += len(sep)
            if j >= 0:
                offsets[j] = pos
            out.append(text)
            pos += len(text)
        used = len({para for _, para, j in pieces if j < 0})
        return "".join(out), tuple(offsets), used

    def word_ends(self, k: int) -> list[int]:
        """Offsets just past each word of sentence ``k`` (the last one is its length)."""
        return [m.end() for m in re.finditer(r"\S+", self.flat[k][1])]


def _fit_document(
    paragraphs: Sequence[Paragraph], plants: Sequence[_Plant], sizer: Sizer
) -> _Document:
    """The longest document with the plants not longer than ``target`` in ``measure``'s
    unit: whole sentences, then whole words of the next one, then, if that still leaves
    more than 0.5% of the target, characters of one more word."""
    target, measure, unit = sizer.target, sizer.measure, sizer.unit
    hay = _Haystack(paragraphs, plants)
    n = len(hay)
    cache: dict[tuple[int, int], int] = {}

    def size(k: int, w: int = 0) -> int:
        if (k, w) not in cache:
            cache[(k, w)] = measure(hay.build(k, w)[0])
        return cache[(k, w)]

    base = size(0)
    if base > target:
        raise ValueError(
            f"impossible length: the {len(plants)} planted fact(s) alone take {base} {unit} "
            f"but the target length is {target}; ask for a longer context or fewer distractors"
        )

    def sentences(k: int) -> int:
        if k <= n:
            return size(k)
        full = size(n)
        if full <= target:
            raise ValueError(
                f"length={target} {unit} is longer than the documentation text in "
                f"{SOURCE} ({full} {unit} with the facts); ask for a shorter context"
            )
        return full * k // n + (k - n)

    k = largest_fitting(sentences, target, max(4, target // 160))
    if k < 1:
        raise ValueError(
            f"impossible length: length={target} {unit} holds the planted facts "
            f"({base} {unit}) but not one sentence of prose; ask for a longer context"
        )
    # then whole words of the next sentence, then characters of one more word
    ends = hay.word_ends(k)
    beyond = sentences(k + 1)

    def with_words(w: int) -> int:
        return size(k, ends[w - 1]) if 0 < w < len(ends) else (size(k) if w == 0 else beyond + w)

    words = largest_fitting(with_words, target, max(1, len(ends) // 2))
    w = ends[words - 1] if words else 0
    if target - size(k, w) > max(1, target // 200):
        nxt = ends[words]

        def with_chars(c: int) -> int:
            return size(k, w + c) if w + c < nxt else beyond + c

        w += largest_fitting(with_chars, target, max(1, (nxt - w) // 2))
    context, offsets, used = hay.build(k, w)
    filler = len(context) - sum(len(p.text) for p in plants)
    return _Document(context, size(k, w), offsets, filler, used)


@functools.cache
def _starts() -> tuple[tuple[int, ...], int]:
    """The prose paragraphs a window may start at, and a stride coprime with their
    number near its golden section (so consecutive items start far apart)."""
    prose = tuple(i for i, p in enumerate(doc_paragraphs()) if p.prose)
    n = len(prose)
    stride = round(n / 1.618033988749895)
    while math.gcd(stride, n) != 1:
        stride += 1
    return prose, stride


def _window(task: str, seed: int, index: int, attempt: int = 0) -> tuple[list[Paragraph], int]:
    """Paragraphs in reading order from a start chosen by ``(task, seed, index)``,
    wrapping round once. The items of one seed start at distinct prose paragraphs (for
    ``index`` below their number, about 1,300). ``attempt > 0`` draws another start, for
    the rare window too crowded with code to hold a two-hop item."""
    paras = doc_paragraphs()
    prose, stride = _starts()
    base = random.Random(f"lc-evals:{task}:{seed}:window").randrange(len(prose))
    if attempt:
        base += random.Random(f"lc-evals:{task}:{seed}:{index}:{attempt}").randrange(len(prose))
    start = prose[(base + index * stride) % len(prose)]
    return [*paras[start:], *paras[:start]], start


# --------------------------------------------------------------------------------------
# the generators


@dataclass
class _Draft:
    """What a kind produces before the document is fitted."""

    question: str
    answers: tuple[str, ...]
    facts: list[_Plant]
    distractors: list[_Plant]
    asked_entity: str
    family: str
    extra: dict[str, Any]


def _seeded_depth(rng: random.Random, depth: float | None) -> float:
    return float(depth) if depth is not None else rng.random()


def _draft_single(rng: random.Random, cfg: DocQAConfig) -> _Draft:
    family = rng.choice(FACT_FAMILIES)
    people = _people(rng, 1 + cfg.distractors)
    values = rng.sample(family.answers, 1 + cfg.distractors)
    depth = _seeded_depth(rng, cfg.depth)
    fact = _Plant(family.fact_text(people[0], values[0]), depth)
    others = [
        _Plant(family.fact_text(p, v), rng.random())
        for p, v in zip(people[1:], values[1:], strict=True)
    ]
    return _Draft(
        family.question_text(people[0]),
        (values[0],),
        [fact],
        others,
        people[0],
        family.name,
        {"distractor_answers": values[1:]},
    )


def _draft_reworded(rng: random.Random, cfg: DocQAConfig) -> _Draft:
    template = rng.choice(REWORDED_BANK)
    people = _people(rng, 1 + cfg.distractors)
    pairs = rng.sample(range(len(template.pairs)), 1 + cfg.distractors)
    values = rng.sample(template.answers, 1 + cfg.distractors)
    depth = _seeded_depth(rng, cfg.depth)
    plants = [
        _Plant(template.fact_text(p, pair, v), depth if i == 0 else rng.random())
        for i, (p, pair, v) in enumerate(zip(people, pairs, values, strict=True))
    ]
    fact_word, question_word = template.pairs[pairs[0]]
    return _Draft(
        template.question_text(pairs[0]),
        (values[0],),
        plants[:1],
        plants[1:],
        people[0],
        template.name,
        {
            "fact_word": fact_word,
            "question_word": question_word,
            "distractor_answers": values[1:],
        },
    )


def _draft_absent(rng: random.Random, cfg: DocQAConfig) -> _Draft:
    family = rng.choice(FACT_FAMILIES)
    people = _people(rng, 1 + cfg.distractors)
    values = rng.sample(family.answers, cfg.distractors)
    others = [
        _Plant(family.fact_text(p, v), rng.random())
        for p, v in zip(people[1:], values, strict=True)
    ]
    return _Draft(
        family.question_text(people[0]),
        (ABSTAIN_ANSWER,),
        [],
        others,
        people[0],
        family.name,
        {"distractor_answers": values},
    )


def _draft_two_hop(rng: random.Random, cfg: DocQAConfig) -> _Draft:
    family = rng.choice(FACT_FAMILIES)
    relations = rng.sample(RELATIONS, 3)
    d = cfg.distractors
    people = iter(_people(rng, 2 + 2 * d))
    values = iter(rng.sample(family.answers, 1 + d))
    asked, bridge, answer = next(people), next(people), next(values)
    first = _seeded_depth(rng, cfg.depth)
    if first <= 0.5:
        second = rng.uniform(first + 0.5, 1.0)
    else:
        second = rng.uniform(0.0, first - 0.5)
    hop1 = _Plant(relation_text(asked, relations[0], bridge), first)
    hop2 = _Plant(family.fact_text(bridge, answer), second, apart_from=0, min_gap=0.45)
    others: list[_Plant] = []
    distractor_answers: list[str] = []
    last = ""
    for j in range(d):
        if j % 4 == 0:  # another relation of the asked person
            last = next(people)
            text = relation_text(asked, relations[1 + j // 4], last)
        elif j % 4 == 2:  # the asked relation of someone else
            last = next(people)
            text = relation_text(next(people), relations[0], last)
        else:  # the asked family's fact about the person just introduced
            distractor_answers.append(next(values))
            text = family.fact_text(last, distractor_answers[-1])
        others.append(_Plant(text, rng.random()))
    return _Draft(
        family.question_text(f"{asked}'s {relations[0]}"),
        (answer,),
        [hop1, hop2],
        others,
        asked,
        family.name,
        {
            "relation": relations[0],
            "bridge_entity": bridge,
            "distractor_answers": distractor_answers,
        },
    )


def _draft_count(rng: random.Random, cfg: DocQAConfig) -> _Draft:
    family = rng.choice(COUNT_FAMILIES)
    m = cfg.facts if cfg.facts is not None else rng.randint(2, 5)
    mode = cfg.mode if cfg.mode is not None else rng.choice(COUNT_MODES)
    d = cfg.distractors
    k1s = rng.sample(family.k1, 1 + d) if family.k1 is not None else _people(rng, 1 + d)
    k2s = rng.sample(TOWNS, 1 + d)
    k1, k2 = k1s[0], k2s[0]
    days = rng.sample(WEEKDAYS, m)
    quantities = [rng.randint(2, 9) if mode == "total" else 1 for _ in range(m)]
    facts = [
        _Plant(family.fact_text(mode, k1, k2, day, q), (i + rng.random()) / m)
        for i, (day, q) in enumerate(zip(days, quantities, strict=True))
    ]
    others = []
    for j in range(d):
        a = k1 if j % 3 == 0 else k1s[1 + j]
        b = k2 if j % 3 == 1 else k2s[1 + j]
        q = rng.randint(2, 9) if mode == "total" else 1
        others.append(_Plant(family.fact_text(mode, a, b, rng.choice(WEEKDAYS), q), rng.random()))
    total = sum(quantities)
    return _Draft(
        family.question_text(mode, k1, k2),
        number_answers(total),
        facts,
        others,
        k1,
        family.name,
        {
            "mode": mode,
            "count": m,
            "total": total,
            "quantities": quantities,
            "asked_keys": [k1, k2],
        },
    )


_WINDOW_ATTEMPTS = 8
"""Windows tried for a two-hop item before its length is declared too small."""

_DRAFTERS: dict[str, Callable[[random.Random, DocQAConfig], _Draft]] = {
    "single": _draft_single,
    "reworded": _draft_reworded,
    "absent": _draft_absent,
    "two_hop": _draft_two_hop,
    "count": _draft_count,
}


def docqa(
    n: int,
    length: int,
    seed: int,
    tokenizer: Any = None,
    *,
    kind: str = "single",
    distractors: int = 3,
    depth: float | None = None,
    facts: int | None = None,
    mode: str | None = None,
) -> list[TaskItem]:
    """Document-QA items of ``kind`` over Python's documentation text.

    Args:
        n: number of items (>= 1).
        length: target context length in tokens of ``tokenizer`` (characters if ``None``);
            the context never exceeds it and lands within 1% of it for a few hundred
            tokens or more. At most about the documentation's size (360K characters on
            CPython 3.11).
        seed: explicit seed; item ``i`` does not depend on ``n``.
        tokenizer: anything with ``encode(text)``.
        kind: the kind of question (see :class:`DocQAConfig`, as for the options below).
        distractors: same-family facts about other entities.
        depth: the first fact's position (fraction of the document before it).
        facts: number of count facts (``count`` only).
        mode: ``"count"`` or ``"total"`` (``count`` only).

    Returns:
        Items of task ``docqa_<kind>`` whose ``metadata`` holds, besides the common keys
        (``target_length``, ``length``, ``length_unit``, ``seed``, ``index``): ``kind``,
        ``answerable``, ``family``, ``asked_entity``, ``facts`` (the supporting
        sentences; two-hop: relation first), ``fact_offsets`` (character offsets in the
        context), ``fact_depths`` (requested fractions of the prose), ``fact_positions``
        (offset / context length), the same three for ``distractors``,
        ``distractor_answers``, ``depth`` (single, reworded, two_hop), ``source``,
        ``python_version``, ``start_paragraph``, ``start_topic``, ``paragraphs`` and
        ``filler_chars``; plus ``fact_word``/``question_word`` (reworded),
        ``relation``/``bridge_entity`` (two_hop), ``mode``, ``count``, ``total``,
        ``quantities`` and ``asked_keys`` (count).

    Raises:
        ValueError: bad options (unknown kind, out-of-range values), ``n < 1``, a length
            too small for the facts (or, for two_hop, for their separation) or larger
            than the documentation text.

    Examples:
        >>> item = docqa(1, 3000, seed=0, kind="two_hop")[0]
        >>> item.task, item.metadata["answerable"], len(item.metadata["facts"])
        ('docqa_two_hop', True, 2)
        >>> all(item.context.count(f) == 1 for f in item.metadata["facts"])
        True
    """
    cfg = DocQAConfig(kind=kind, distractors=distractors, depth=depth, facts=facts, mode=mode)
    if not isinstance(n, int) or isinstance(n, bool) or n < 1:
        raise ValueError(f"n must be a positive integer, got {n!r}")
    if not isinstance(length, int) or isinstance(length, bool) or length < 1:
        raise ValueError(f"length must be a positive integer, got {length!r}")
    if not isinstance(seed, int) or isinstance(seed, bool):
        raise ValueError(f"seed must be an integer, got {seed!r}")
    task = f"docqa_{cfg.kind}"
    sizer = Sizer.of(tokenizer, length)
    unit = sizer.unit

    def draft_item(rng: random.Random, index: int) -> Draft:
        draft = _DRAFTERS[cfg.kind](rng, cfg)
        plants = [*draft.facts, *draft.distractors]
        for attempt in range(_WINDOW_ATTEMPTS):
            paragraphs, start = _window(task, seed, index, attempt)
            doc = _fit_document(paragraphs, plants, sizer)
            if cfg.kind != "two_hop":
                break
            gap = abs(doc.offsets[1] - doc.offsets[0]) / len(doc.context)
            if gap >= MIN_HOP_SEPARATION:
                break
        else:
            raise ValueError(
                f"impossible length: length={length} {unit} cannot keep the two facts "
                f"{MIN_HOP_SEPARATION:.0%} of the document apart (got {gap:.1%} in the last "
                f"of {_WINDOW_ATTEMPTS} windows); ask for a longer context or fewer distractors"
            )
        nf = len(draft.facts)
        offsets = list(doc.offsets)
        positions = [round(o / len(doc.context), 6) for o in offsets]
        meta: dict[str, Any] = {
            "kind": cfg.kind,
            "answerable": cfg.kind != "absent",
            "family": draft.family,
            "asked_entity": draft.asked_entity,
            "facts": [p.text for p in draft.facts],
            "fact_offsets": offsets[:nf],
            "fact_depths": [p.depth for p in draft.facts],
            "fact_positions": positions[:nf],
            "distractors": [p.text for p in draft.distractors],
            "distractor_offsets": offsets[nf:],
            "distractor_depths": [p.depth for p in draft.distractors],
            "distractor_positions": positions[nf:],
        }
        if cfg.kind in ("single", "reworded", "two_hop"):
            meta["depth"] = draft.facts[0].depth
        meta.update(draft.extra)
        meta.update(
            source=SOURCE,
            python_version=platform.python_version(),
            start_paragraph=start,
            start_topic=paragraphs[0].topic,
            paragraphs=doc.paragraphs,
            filler_chars=doc.filler_chars,
            scorer="docqa",
        )
        return Draft(doc.context, doc.length, ItemPrompt(draft.question), draft.answers, meta)

    return sizer.items(task, n, seed, draft_item)


def docqa_single(
    n: int,
    length: int,
    seed: int,
    tokenizer: Any = None,
    *,
    distractors: int = 3,
    depth: float | None = None,
) -> list[TaskItem]:
    """One planted fact asked directly, among same-family facts about other people.

    Examples:
        >>> item = docqa_single(1, 2000, seed=1, depth=0.5)[0]
        >>> item.answers[0] in item.metadata["facts"][0]
        True
    """
    return docqa(n, length, seed, tokenizer, kind="single", distractors=distractors, depth=depth)


def docqa_reworded(
    n: int,
    length: int,
    seed: int,
    tokenizer: Any = None,
    *,
    distractors: int = 3,
    depth: float | None = None,
) -> list[TaskItem]:
    """One planted fact asked in words it does not use (see :data:`REWORDED_BANK`).

    Examples:
        >>> item = docqa_reworded(1, 2000, seed=1)[0]
        >>> content_words(item.question) & content_words(item.metadata["facts"][0])
        frozenset()
    """
    return docqa(n, length, seed, tokenizer, kind="reworded", distractors=distractors, depth=depth)


def docqa_absent(
    n: int, length: int, seed: int, tokenizer: Any = None, *, distractors: int = 3
) -> list[TaskItem]:
    """A question about a person the document never names; the answer is to abstain.

    Examples:
        >>> item = docqa_absent(1, 2000, seed=1)[0]
        >>> item.answers == (ABSTAIN_ANSWER,), item.metadata["answerable"]
        (True, False)
    """
    return docqa(n, length, seed, tokenizer, kind="absent", distractors=distractors)


def docqa_two_hop(
    n: int,
    length: int,
    seed: int,
    tokenizer: Any = None,
    *,
    distractors: int = 3,
    depth: float | None = None,
) -> list[TaskItem]:
    """Two facts at least 40% of the document apart; only together do they answer.

    Examples:
        >>> item = docqa_two_hop(1, 4000, seed=2)[0]
        >>> hop1, hop2 = item.metadata["facts"]
        >>> item.metadata["asked_entity"] in hop1 and item.metadata["asked_entity"] not in hop2
        True
    """
    return docqa(n, length, seed, tokenizer, kind="two_hop", distractors=distractors, depth=depth)


def docqa_count(
    n: int,
    length: int,
    seed: int,
    tokenizer: Any = None,
    *,
    distractors: int = 3,
    facts: int | None = None,
    mode: str | None = None,
) -> list[TaskItem]:
    """2-5 events spread over the document; how many were there, or what is their total.

    Examples:
        >>> item = docqa_count(1, 3000, seed=0, facts=3, mode="count")[0]
        >>> item.answers[:2]
        ('3', 'three')
    """
    return docqa(
        n,
        length,
        seed,
        tokenizer,
        kind="count",
        distractors=distractors,
        facts=facts,
        mode=mode,
    )


# --------------------------------------------------------------------------------------
# scoring

_ABSTAIN_PATTERNS: tuple[str, ...] = (
    r"\bnot (?:be )?(?:found|mentioned|stated|given|provided|specified|included|present|"
    r"contained|available|answerable|known|said|listed|indicated)\b",
    r"\bnot (?:in|within|part of) the (?:document|text|context|passage|documentation)\b",
    r"\b(?:does|do|did|is|are|was|were|has|have)(?: not|n't|n’t) "
    r"(?:say|mention|state|specify|contain|include|tell|provide|give|appear|exist|answer|"
    r"indicate|reveal|name|list)\b",
    r"\bno (?:information|mention|answer|data|record|indication|details?|reference|evidence)\b",
    r"\bnot enough (?:information|context|detail|data)\b",
    r"\binsufficient (?:information|context|detail|data)\b",
    r"\bunknown\b",
    r"\bunanswerable\b",
    r"\bcan(?:not|'t|’t)(?: be)? (?:determined|answered|determine|answer|tell|find|say|know)\b",
    r"\bunable to (?:determine|answer|find|tell|say|locate)\b",
    r"\bi (?:do not|don't|don’t) know\b",
    r"^\s*(?:none|n/?a|nothing|no answer)\s*[.!]?\s*$",
)
_ABSTAIN = re.compile("|".join(f"(?:{p})" for p in _ABSTAIN_PATTERNS), re.IGNORECASE)


def score_abstention(prediction: str) -> bool:
    """Whether ``prediction`` declines to answer ("not found in the document", "The
    document does not say", "unknown", "not mentioned", "no information", ...).

    The final answer is taken first (:func:`~lc_evals.scorers.extract_answer`), so a
    reply that reasons aloud and ends with "the answer is Vessby" does not abstain.

    Examples:
        >>> score_abstention("The document does not say."), score_abstention("Vessby")
        (True, False)
    """
    return _ABSTAIN.search(extract_answer(prediction)) is not None


def _mentions(answer: str, prediction: str) -> bool:
    a = normalize(answer)
    return bool(a) and f" {a} " in f" {normalize(prediction)} "


def docqa_match(prediction: str, answers: Sequence[str]) -> float:
    """The ``docqa`` scorer, ``(prediction, answers) -> 0.0 | 1.0``.

    With ``answers == [ABSTAIN_ANSWER]`` (an unanswerable item): 1.0 when the prediction
    abstains. Otherwise 1.0 when the prediction does not abstain and holds one of
    ``answers`` as whole words after normalization (case, punctuation, articles), so
    ``"7"`` does not match ``"17"``; count items list the digits and the number words.

    Examples:
        >>> docqa_match("It is kept in Vessby.", ["Vessby"])
        1.0
        >>> docqa_match("Not mentioned; maybe Vessby.", ["Vessby"])
        0.0
        >>> docqa_match("No information.", [ABSTAIN_ANSWER])
        1.0
    """
    if isinstance(answers, str) or not answers:
        raise ValueError(f"answers must be a non-empty sequence of strings, got {answers!r}")
    abstains = score_abstention(prediction)
    if list(answers) == [ABSTAIN_ANSWER]:
        return float(abstains)
    if abstains:
        return 0.0
    final = extract_answer(prediction)
    return float(any(_mentions(a, final) for a in answers))


def score_docqa(item: TaskItem, prediction: str) -> bool:
    """Whether ``prediction`` is right for a docqa ``item``: an abstention for an
    unanswerable one (``metadata["answerable"] is False``), else a non-abstaining
    reply naming the answer (see :func:`docqa_match`).

    Examples:
        >>> item = docqa_absent(1, 2000, seed=0)[0]
        >>> score_docqa(item, "Unknown."), score_docqa(item, item.metadata["distractor_answers"][0])
        (True, False)
    """
    if item.metadata.get("answerable", True) is False:
        return score_abstention(prediction)
    return docqa_match(prediction, item.answers) == 1.0


SCORERS.setdefault("docqa", docqa_match)
