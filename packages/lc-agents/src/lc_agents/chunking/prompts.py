"""Default prompts of the chunk-and-aggregate workflow (written for this project).

Templates use the literal placeholders ``{document}``, ``{question}`` and ``{responses}``,
substituted with ``str.replace`` so that braces elsewhere in a template or a document are
left alone.
"""

from __future__ import annotations

WORKER_TEMPLATE = (
    "You see one part of a longer document.\n\n"
    "<part>\n{document}\n</part>\n\n"
    "Question: {question}\n"
    "Answer from this part only, as briefly as possible. "
    "If this part does not contain the answer, reply exactly: none"
)

MANAGER_TEMPLATE = (
    "A long document was split into parts and each part was read by a different reader. "
    "Most parts do not contain the answer, so most readers replied 'none'.\n\n"
    "Question: {question}\n\n"
    "Replies, in document order:\n{responses}\n\n"
    "Give the final answer to the question, as briefly as possible, without explanation."
)


def fill(template: str, **values: str) -> str:
    """Replace each ``{name}`` in ``template`` by ``values[name]``.

    Examples:
        >>> fill("Q: {question}", question="Who?")
        'Q: Who?'
    """
    out = template
    for name, value in values.items():
        out = out.replace("{" + name + "}", value)
    return out
