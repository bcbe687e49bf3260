"""Multi-conversation rollouts of MemAgent for RL training.

A MemAgent run on one sample is several independent conversations: one per chunk (the
memory update ``m_k = update(q, m_{k-1}, c_k)``) and one for the final answer. Each is
recorded as a :class:`Turn` (prompt token ids, completion token ids, and the sampling
policy's log-probabilities of the completion tokens). Only the final answer is scored
(an lc-evals scorer); the group-normalized advantage of the sample is later broadcast to
the tokens of all of its turns (:func:`lc_train.rl.dapo.broadcast_to_turns`).

The agent itself is lc-agents' :class:`~lc_agents.memagent.MemAgent`, unchanged: the
rollout gives it a backend (:class:`PolicySampler`) that samples from the policy being
trained and records every call, so the training prompts are exactly the agent's
prompts.

Example:
    >>> from lc_agents.memagent import MemAgentConfig
    >>> from lc_train.rl.memagent import rollout_group
    >>> cfg = MemAgentConfig.plain(chunk_tokens=512)
    >>> group = rollout_group(model, tokenizer, item, cfg, group_size=4, seed=0)  # doctest: +SKIP
    >>> [len(e.turns) for e in group], [e.reward for e in group]  # doctest: +SKIP
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import torch

if TYPE_CHECKING:
    from lc_agents.memagent import MemAgentConfig

__all__ = [
    "Episode",
    "PolicySampler",
    "RecordingBackend",
    "Turn",
    "rollout",
    "rollout_group",
]


@dataclass(frozen=True)
class Turn:
    """One conversation of a MemAgent run: a training sequence.

    Attributes:
        prompt_ids: the chat-formatted prompt, token ids.
        completion_ids: the generated (or oracle) reply, token ids, ending with the end
            token when the reply stopped by itself.
        kind: ``"update"`` (a memory update) or ``"answer"`` (the final answer).
        logps: log-probabilities of ``completion_ids`` under the policy that produced them
            (``None`` for oracle turns); one per completion token.
    """

    prompt_ids: tuple[int, ...]
    completion_ids: tuple[int, ...]
    kind: str
    logps: tuple[float, ...] | None = None

    def __post_init__(self) -> None:
        if self.kind not in ("update", "answer"):
            raise ValueError(f"Turn.kind must be 'update' or 'answer', got {self.kind!r}")
        if not self.prompt_ids:
            raise ValueError("Turn.prompt_ids must not be empty")
        if self.logps is not None and len(self.logps) != len(self.completion_ids):
            raise ValueError(
                f"Turn.logps has {len(self.logps)} entries for "
                f"{len(self.completion_ids)} completion tokens"
            )


@dataclass
class Episode:
    """One MemAgent run on one sample: its turns (updates first, answer last) and reward.

    Attributes:
        item_id: id of the evaluated item.
        turns: every recorded turn, in call order.
        answer: the final answer text ("" when the agent produced none).
        reward: the answer's score (lc-evals scorer, in [0, 1]).
        memories: the memory after each chunk (what the next turn's prompt shows).
    """

    item_id: str
    turns: list[Turn] = field(default_factory=list)
    answer: str = ""
    reward: float = 0.0
    memories: list[str] = field(default_factory=list)


class RecordingBackend:
    """A MemAgent backend for a local model that records every generation as a :class:`Turn`.

    It offers what MemAgent's token-exact path needs (``supports_constraints``,
    ``prompt_ids``, ``generate_ids``, ``end_ids``, ``tokenizer``). Subclasses implement
    :meth:`reply`, which returns the completion ids (with the end token if the reply
    stopped) and their log-probabilities (or ``None``).

    Copy constraints are not supported: RL trains free-text memory updates, so use a
    config with ``copy_memory=False`` and ``copy_answer=False``.
    """

    supports_constraints = True

    def __init__(self, tokenizer: Any, end_ids: Sequence[int] | None = None) -> None:
        self.tokenizer = tokenizer
        ends = list(end_ids) if end_ids is not None else [tokenizer.eos_token_id]
        self.end_ids: list[int] = sorted({int(t) for t in ends if t is not None})
        if not self.end_ids:
            raise ValueError("need at least one end token id")
        self.turns: list[Turn] = []
        self.answer_phase = False

    def prompt_ids(self, messages: Sequence[Any]) -> list[int]:
        """Token ids of the chat-formatted conversation, ready for the assistant's turn."""
        ids: Any = self.tokenizer.apply_chat_template(
            [dict(m) for m in messages], add_generation_prompt=True, tokenize=True
        )
        if isinstance(ids, dict) or hasattr(ids, "keys"):
            ids = ids["input_ids"]
        return [int(t) for t in ids]

    def reply(self, prompt: list[int], max_tokens: int) -> tuple[list[int], list[float] | None]:
        """The completion ids for ``prompt`` (at most ``max_tokens``) and their logps."""
        raise NotImplementedError

    def chat(self, messages: Sequence[Any], *, max_tokens: int = 256, **_: Any) -> str:
        """Reply to a conversation (recorded like every other call)."""
        ids = self.generate_ids(self.prompt_ids(messages), max_tokens=max_tokens)
        return str(self.tokenizer.decode(ids, skip_special_tokens=True)).strip()

    async def achat(self, messages: Sequence[Any], **options: Any) -> str:
        """Same as :meth:`chat` (runs inline)."""
        return self.chat(messages, **options)

    def chat_batch(self, conversations: Sequence[Sequence[Any]], **options: Any) -> list[str]:
        """:meth:`chat` for each conversation in turn."""
        return [self.chat(m, **options) for m in conversations]

    def generate_ids(
        self,
        prompt: Sequence[int],
        *,
        max_tokens: int | None = None,
        constraint: Any = None,
        **_: Any,
    ) -> list[int]:
        """MemAgent's entry point: reply, record the turn, return ids without end tokens."""
        if constraint is not None:
            raise ValueError(
                "copy constraints are not supported in RL rollouts; use a MemAgentConfig "
                "with copy_memory=False and copy_answer=False"
            )
        if max_tokens is None or max_tokens < 1:
            raise ValueError(f"max_tokens must be >= 1, got {max_tokens}")
        prompt = [int(t) for t in prompt]
        ids, logps = self.reply(prompt, max_tokens)
        kind = "answer" if self.answer_phase else "update"
        self.turns.append(
            Turn(tuple(prompt), tuple(ids), kind, tuple(logps) if logps is not None else None)
        )
        out = list(ids)
        while out and out[-1] in self.end_ids:
            out.pop()
        return out


class PolicySampler(RecordingBackend):
    """Sample replies from a causal LM (KV-cached loop) and record their log-probabilities.

    Args:
        model: causal LM (its current weights are the sampling policy).
        tokenizer: its tokenizer (with a chat template).
        temperature: sampling temperature (> 0); logps are of ``softmax(logits / T)``,
            the distribution sampled from. ``0`` decodes greedily (logps still recorded
            at temperature 1).
        seed: seed of the sampler's own ``torch.Generator`` (no global RNG is touched).
        end_ids: tokens that end a reply (default: the tokenizer's EOS and the model's
            generation-config EOS ids).
    """

    def __init__(
        self,
        model: Any,
        tokenizer: Any,
        *,
        temperature: float = 1.0,
        seed: int = 0,
        end_ids: Sequence[int] | None = None,
    ) -> None:
        if temperature < 0:
            raise ValueError(f"temperature must be >= 0, got {temperature}")
        if end_ids is None:
            ends: set[int] = {tokenizer.eos_token_id}
            gen = getattr(getattr(model, "generation_config", None), "eos_token_id", None)
            if isinstance(gen, int):
                ends.add(gen)
            elif gen:
                ends.update(gen)
            end_ids = [t for t in ends if t is not None]
        super().__init__(tokenizer, end_ids)
        self.model = model
        self.temperature = temperature
        self.generator = torch.Generator().manual_seed(seed)

    @torch.no_grad()
    def reply(self, prompt: list[int], max_tokens: int) -> tuple[list[int], list[float] | None]:
        device = next(self.model.parameters()).device
        was_training = self.model.training
        self.model.eval()
        try:
            ids = torch.tensor([prompt], dtype=torch.long, device=device)
            out = self.model(input_ids=ids, use_cache=True)
            past = out.past_key_values
            logits = out.logits[0, -1].float()
            tokens: list[int] = []
            logps: list[float] = []
            ends = set(self.end_ids)
            for _ in range(max_tokens):
                scale = self.temperature if self.temperature > 0 else 1.0
                logprobs = torch.log_softmax(logits / scale, dim=-1)
                if self.temperature > 0:
                    tok = int(
                        torch.multinomial(logprobs.exp().cpu(), 1, generator=self.generator)[0]
                    )
                else:
                    tok = int(logprobs.argmax())
                tokens.append(tok)
                logps.append(float(logprobs[tok]))
                if tok in ends:
                    break
                step = torch.tensor([[tok]], dtype=torch.long, device=device)
                out = self.model(input_ids=step, past_key_values=past, use_cache=True)
                past = out.past_key_values
                logits = out.logits[0, -1].float()
        finally:
            self.model.train(was_training)
        return tokens, logps


def run_episode(
    backend: RecordingBackend,
    item: Any,
    config: MemAgentConfig,
    *,
    scorer: str | Callable[..., float] | None = None,
) -> Episode:
    """Run MemAgent over ``item`` (an lc-evals ``TaskItem``) with ``backend``; score it.

    The reward is ``lc_evals.score(item, answer, scorer)`` (the task's default scorer
    unless given); an empty answer scores 0.
    """
    import lc_evals
    from lc_agents.errors import EmptyReplyError
    from lc_agents.memagent import MemAgent

    if config.copy_memory or config.copy_answer:
        raise ValueError(
            "RL rollouts train free-text memory updates: the MemAgentConfig needs "
            "copy_memory=False and copy_answer=False (see MemAgentConfig.plain)"
        )
    backend.turns = []
    backend.answer_phase = False
    agent = MemAgent(backend, config, tokenizer=backend.tokenizer)
    original_answer = agent.answer_found

    def answer_found(question: str, memory: str) -> tuple[str, bool]:
        backend.answer_phase = True
        return original_answer(question, memory)

    agent.answer_found = answer_found  # type: ignore[method-assign]
    memories: list[str] = []
    try:
        text = agent.run(
            item.context, item.question, on_step=lambda s: memories.append(s.memory)
        ).answer
    except EmptyReplyError:
        text = ""
    reward = float(lc_evals.score(item, text, scorer)) if text else 0.0
    return Episode(
        item_id=item.id, turns=list(backend.turns), answer=text, reward=reward, memories=memories
    )


def rollout(
    model: Any,
    tokenizer: Any,
    item: Any,
    config: MemAgentConfig,
    *,
    seed: int,
    temperature: float = 1.0,
    scorer: str | Callable[..., float] | None = None,
) -> Episode:
    """One sampled MemAgent episode of ``model`` on ``item``.

    Args:
        model: the policy (a causal LM).
        tokenizer: its tokenizer (chat template required).
        item: an lc-evals ``TaskItem`` (context, question, answers).
        config: MemAgent sizes and prompts (free text: ``MemAgentConfig.plain(...)``).
        seed: sampling seed of this episode.
        temperature: sampling temperature (0: greedy).
        scorer: lc-evals scorer name or callable (default: the task's).

    Returns:
        The :class:`Episode`: ``n_chunks`` update turns then one answer turn (fewer if
        the answer was empty), with the sampling log-probabilities.
    """
    sampler = PolicySampler(model, tokenizer, temperature=temperature, seed=seed)
    return run_episode(sampler, item, config, scorer=scorer)


def rollout_group(
    model: Any,
    tokenizer: Any,
    item: Any,
    config: MemAgentConfig,
    *,
    group_size: int,
    seed: int,
    temperature: float = 1.0,
    scorer: str | Callable[..., float] | None = None,
) -> list[Episode]:
    """``group_size`` independent episodes on the same item (seeds ``seed * group_size + g``)."""
    if group_size < 2:
        raise ValueError(f"group_size must be >= 2 (a group needs a baseline), got {group_size}")
    return [
        rollout(
            model,
            tokenizer,
            item,
            config,
            seed=seed * group_size + g,
            temperature=temperature,
            scorer=scorer,
        )
        for g in range(group_size)
    ]
