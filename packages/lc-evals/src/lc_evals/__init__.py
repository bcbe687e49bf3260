"""Long-context evaluation: task generators, scorers and an evaluation harness.

lc-evals imports no other lc package: a system under test is any callable or any
object that satisfies the small :class:`ChatModel` protocol defined here.
"""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version

from lc_evals.errors import ResultsFileError, ResultsFileWarning, StaleResultsError
from lc_evals.executors import Executor, RayExecutor, SerialExecutor, ThreadExecutor
from lc_evals.export import export_lm_eval, lm_eval_task_name
from lc_evals.fingerprint import item_fingerprint, suite_fingerprint
from lc_evals.harness import as_predictor, run
from lc_evals.icl import ICL_TASKS, check_label, fit_shots, make_icl_items
from lc_evals.manifest import read_manifest
from lc_evals.prompts import PROMPT_TEMPLATE, RULER_TEMPLATES, RulerTemplate, render_prompt
from lc_evals.registry import TaskSpec, available_tasks, generate, register_task, task_spec
from lc_evals.report import (
    compare,
    format_table,
    plot_accuracy_vs_length,
    plot_niah_heatmap,
    summarize,
)
from lc_evals.results import Result, load_results, load_suite, read_jsonl, write_suite
from lc_evals.ruler_configs import RULER_CONFIGS, RulerConfig, ruler_suite
from lc_evals.scorers import (
    SCORERS,
    contains_all,
    contains_any,
    exact_match,
    extract_answer,
    get_scorer,
    rouge_l,
    score,
    token_f1,
)
from lc_evals.suite import make_suite
from lc_evals.tasks.docqa import (
    ABSTAIN_ANSWER,
    DOCQA_TEMPLATE,
    DocQAConfig,
    docqa,
    score_abstention,
    score_docqa,
)
from lc_evals.types import ChatModel, Message, TaskItem, Tokenizer

try:
    __version__: str = version("lc-evals")
except PackageNotFoundError:  # running from a source tree that was never installed
    __version__ = "0.0.0+unknown"

__all__ = [
    "ABSTAIN_ANSWER",
    "DOCQA_TEMPLATE",
    "ICL_TASKS",
    "PROMPT_TEMPLATE",
    "RULER_CONFIGS",
    "RULER_TEMPLATES",
    "SCORERS",
    "ChatModel",
    "DocQAConfig",
    "Executor",
    "Message",
    "RayExecutor",
    "Result",
    "ResultsFileError",
    "ResultsFileWarning",
    "RulerConfig",
    "RulerTemplate",
    "SerialExecutor",
    "StaleResultsError",
    "TaskItem",
    "TaskSpec",
    "ThreadExecutor",
    "Tokenizer",
    "__version__",
    "as_predictor",
    "available_tasks",
    "check_label",
    "compare",
    "contains_all",
    "contains_any",
    "docqa",
    "exact_match",
    "export_lm_eval",
    "extract_answer",
    "fit_shots",
    "format_table",
    "generate",
    "get_scorer",
    "item_fingerprint",
    "lm_eval_task_name",
    "load_results",
    "load_suite",
    "make_icl_items",
    "make_suite",
    "plot_accuracy_vs_length",
    "plot_niah_heatmap",
    "read_jsonl",
    "read_manifest",
    "register_task",
    "render_prompt",
    "rouge_l",
    "ruler_suite",
    "run",
    "score",
    "score_abstention",
    "score_docqa",
    "suite_fingerprint",
    "summarize",
    "task_spec",
    "token_f1",
    "write_suite",
]
