"""Long-context evaluation: task generators, scorers and an evaluation harness.

lc-evals imports no other lc package: a system under test is any callable or any
object that satisfies the small :class:`ChatModel` protocol defined here.
"""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version

from lc_evals.registry import TaskSpec, available_tasks, generate, register_task, task_spec
from lc_evals.types import ChatModel, Message, TaskItem, Tokenizer

try:
    __version__: str = version("lc-evals")
except PackageNotFoundError:  # running from a source tree that was never installed
    __version__ = "0.0.0+unknown"

__all__ = [
    "ChatModel",
    "Message",
    "TaskItem",
    "TaskSpec",
    "Tokenizer",
    "__version__",
    "available_tasks",
    "generate",
    "register_task",
    "task_spec",
]
