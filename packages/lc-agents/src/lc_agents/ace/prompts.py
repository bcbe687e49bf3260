"""The prompts of the three ACE roles (ours), as one replaceable frozen dataclass.

Each template is filled with :meth:`str.format`; the fields each one receives are listed
in :class:`AcePrompts`. Replace any of them with ``dataclasses.replace(DEFAULT_PROMPTS,
generator_system=...)``.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["DEFAULT_PROMPTS", "AcePrompts"]

_GENERATOR_SYSTEM = (
    "You solve tasks using a playbook of numbered notes collected from earlier tasks. "
    "Follow the notes that apply. Mention the ids of the notes you used in square "
    "brackets, like [rules-00001]. End with one line 'Final answer: <answer>'."
)

_GENERATOR_USER = "Playbook:\n{playbook}\n\nTask:\n{question}"

_REFLECTOR_SYSTEM = (
    "You review an attempt at a task and find what went right or wrong. Reply with one "
    'JSON object with the keys: "diagnosis" (a sentence on the cause of the result), '
    '"insights" (a list of short, concrete, reusable lessons for similar future tasks; '
    'state exact names, values and rules) and "bullet_tags" (a list of objects '
    '{{"id": <note id>, "tag": "helpful" | "harmful" | "neutral"}} for the '
    "playbook notes the attempt used)."
)

_REFLECTOR_USER = (
    "Task:\n{question}\n\nAttempt:\n{attempt}\n\nAnswer given: {answer}\n\n"
    "Feedback: {feedback}\n{ground_truth}\nNotes the attempt used:\n{used}\n"
    "{previous}Reply with the JSON object only."
)

_REFLECTOR_REFINE = (
    "\nYour previous review was:\n{previous}\nMake it more precise and more specific; "
    "keep what is right.\n"
)

_CURATOR_SYSTEM = (
    "You maintain a playbook of notes. Given lessons from a review, decide the smallest "
    'edits to the playbook. Reply with one JSON object {{"operations": [...]}} where each '
    "operation is one of:\n"
    '{{"op": "ADD", "section": <section name>, "content": <new note>}}\n'
    '{{"op": "UPDATE", "id": <note id>, "content": <improved note>}}\n'
    '{{"op": "MERGE", "ids": [<id kept>, <id merged into it>], "content": <combined note>}}\n'
    '{{"op": "DELETE", "id": <note id>}}\n'
    "Add only lessons the playbook does not already state. Never rewrite the whole "
    "playbook. Sections in use: {sections}."
)

_CURATOR_USER = (
    "Playbook:\n{playbook}\n\nReview of the latest task:\nDiagnosis: {diagnosis}\n"
    "Lessons:\n{insights}\n\nReply with the JSON object only."
)

_REWRITE_SYSTEM = (
    "You keep a cheatsheet of lessons for solving tasks. Rewrite the whole cheatsheet so "
    "that it includes what the latest task taught. Reply with the new cheatsheet only."
)

_REWRITE_USER = (
    "Current cheatsheet:\n{memory}\n\nLatest task:\n{question}\nAnswer given: {answer}\n"
    "Feedback: {feedback}\n{ground_truth}"
)


@dataclass(frozen=True)
class AcePrompts:
    """Templates of the generator, reflector, curator and the rewrite baseline.

    Attributes:
        generator_system: system message of the generator.
        generator_user: fields ``{playbook}``, ``{question}``.
        reflector_system: system message of the reflector.
        reflector_user: fields ``{question}``, ``{attempt}``, ``{answer}``,
            ``{feedback}``, ``{ground_truth}`` (a line or empty), ``{used}``,
            ``{previous}`` (the refinement block or empty).
        reflector_refine: field ``{previous}`` (the previous reflection as JSON).
        curator_system: field ``{sections}``.
        curator_user: fields ``{playbook}``, ``{diagnosis}``, ``{insights}``.
        rewrite_system: system message of the rewrite-everything baseline.
        rewrite_user: fields ``{memory}``, ``{question}``, ``{answer}``, ``{feedback}``,
            ``{ground_truth}``.
    """

    generator_system: str = _GENERATOR_SYSTEM
    generator_user: str = _GENERATOR_USER
    reflector_system: str = _REFLECTOR_SYSTEM
    reflector_user: str = _REFLECTOR_USER
    reflector_refine: str = _REFLECTOR_REFINE
    curator_system: str = _CURATOR_SYSTEM
    curator_user: str = _CURATOR_USER
    rewrite_system: str = _REWRITE_SYSTEM
    rewrite_user: str = _REWRITE_USER

    def __post_init__(self) -> None:
        for name, value in vars(self).items():
            if not isinstance(value, str) or not value.strip():
                raise ValueError(f"{name} must be a non-empty template string, got {value!r}")


DEFAULT_PROMPTS = AcePrompts()
