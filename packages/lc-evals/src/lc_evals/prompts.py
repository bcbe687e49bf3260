"""How an item becomes the text a model reads, and RULER's task templates.

The plain prompt (:data:`PROMPT_TEMPLATE`) is the context, a blank line and the
question. An item may carry its own prompt: ``metadata["prompt_template"]`` (a format
string with ``{context}`` and ``{question}``) and ``metadata["answer_prefix"]`` (text
the answer continues). The RULER generators write both with ``template="ruler"``, and
:func:`render_prompt` then gives RULER's input text, answer prefix included, as RULER
feeds it to a model with its ``base`` model template.

:data:`RULER_TEMPLATES` holds RULER's task templates as RULER defines them
(``scripts/data/synthetic/constants.py`` of NVIDIA/RULER, commit c3f5e3b). They are
the benchmark's definition and are kept to the letter.
"""

from __future__ import annotations

from dataclasses import dataclass

from lc_evals.types import TaskItem

PROMPT_TEMPLATE = "{context}\n\n{question}"
"""The plain prompt: the context, a blank line, the question."""


@dataclass(frozen=True)
class RulerTemplate:
    """One of RULER's task templates.

    Attributes:
        template: the instruction, ``{context}`` and the question line; other fields
            (``{query}``, ``{type_needle_v}``, ``{num_v}``) are RULER's.
        answer_prefix: the text the model's answer continues.
        tokens_to_generate: tokens RULER keeps free for the answer within the length.
    """

    template: str
    answer_prefix: str
    tokens_to_generate: int


# Source: NVIDIA/RULER, scripts/data/synthetic/constants.py (commit c3f5e3b), TASKS.
RULER_TEMPLATES: dict[str, RulerTemplate] = {
    "niah": RulerTemplate(
        "Some special magic {type_needle_v} are hidden within the following text. Make sure "
        "to memorize it. I will quiz you about the {type_needle_v} afterwards.\n{context}\n"
        "What are all the special magic {type_needle_v} for {query} mentioned in the provided "
        "text?",
        " The special magic {type_needle_v} for {query} mentioned in the provided text are",
        128,
    ),
    "variable_tracking": RulerTemplate(
        "Memorize and track the chain(s) of variable assignment hidden in the following "
        "text.\n\n{context}\nQuestion: Find all variables that are assigned the value {query} "
        "in the text above.",
        " Answer: According to the chain(s) of variable assignment in the text above, {num_v} "
        "variables are assigned the value {query}, they are: ",
        30,
    ),
    "common_words_extraction": RulerTemplate(
        "Below is a numbered list of words. In these words, some appear more often than "
        "others. Memorize the ones that appear most often.\n{context}\nQuestion: What are the "
        "10 most common words in the above list?",
        " Answer: The top 10 words that appear most often in the list are:",
        120,
    ),
    "freq_words_extraction": RulerTemplate(
        "Read the following coded text and track the frequency of each coded word. Find the "
        "three most frequently appeared coded words. {context}\nQuestion: Do not provide any "
        "explanation. Please ignore the dots '....'. What are the three most frequently "
        "appeared words in the above coded text?",
        " Answer: According to the coded text above, the three most frequently appeared words are:",
        50,
    ),
    "qa": RulerTemplate(
        "Answer the question based on the given documents. Only give me the answer and do "
        "not output any other words.\n\nThe following are given documents.\n\n{context}\n\n"
        "Answer the question based on the given documents. Only give me the answer and do "
        "not output any other words.\n\nQuestion: {query}",
        " Answer:",
        32,
    ),
}
"""RULER's task templates by RULER's task name (``niah``, ``variable_tracking``,
``common_words_extraction``, ``freq_words_extraction``, ``qa``)."""


def render_prompt(item: TaskItem, template: str = PROMPT_TEMPLATE) -> str:
    """The user message sent to a chat model.

    With the default template, an item that carries its own
    ``metadata["prompt_template"]`` is rendered with it, followed by its
    ``metadata["answer_prefix"]``; any other item gets the context, a blank line and the
    question. A template passed explicitly is used for every item.

    Examples:
        >>> render_prompt(TaskItem("t-0-0", "t", "Some text.", "Q?", ("a",)))
        'Some text.\\n\\nQ?'
        >>> own = {"prompt_template": "Read.\\n{context}\\n{question}", "answer_prefix": " A:"}
        >>> render_prompt(TaskItem("t-0-1", "t", "Some text.", "Q?", ("a",), own))
        'Read.\\nSome text.\\nQ? A:'
    """
    own = item.metadata.get("prompt_template")
    if template == PROMPT_TEMPLATE and isinstance(own, str):
        prefix = str(item.metadata.get("answer_prefix", ""))
        return own.format(context=item.context, question=item.question) + prefix
    return template.format(context=item.context, question=item.question)


__all__ = ["PROMPT_TEMPLATE", "RULER_TEMPLATES", "RulerTemplate", "render_prompt"]
