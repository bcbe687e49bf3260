"""LocalBackend.score_continuations against a plain full forward, and the dtype option."""

from __future__ import annotations

import pytest
import torch

from lc_agents.backends.local import LocalBackend


def reference_scores(model, prompt: list[int], continuations: list[list[int]]) -> list[float]:
    """Sum of next-token log-probabilities from one uncached forward per candidate."""
    out = []
    with torch.inference_mode():
        for c in continuations:
            ids = torch.tensor([prompt + c])
            lp = model(input_ids=ids).logits[0].float().log_softmax(-1)
            out.append(float(sum(lp[len(prompt) - 1 + k, t] for k, t in enumerate(c))))
    return out


@pytest.fixture
def backend(tiny_model_dir) -> LocalBackend:
    torch.set_num_threads(1)
    return LocalBackend(tiny_model_dir, max_tokens=8)


def _prompt(backend: LocalBackend, text: str) -> list[int]:
    return backend.prompt_ids([{"role": "user", "content": text}])


def test_scores_equal_an_uncached_forward(backend: LocalBackend) -> None:
    prompt = _prompt(backend, "the lighthouse keeper counts the boats " * 6)
    conts = [[5], [7, 9], [11, 3], [4, 4, 4], [8, 2, 6, 1]]  # mixed lengths, one shared start
    got = backend.score_continuations(prompt, conts)
    want = reference_scores(backend.model, prompt, conts)
    assert got == pytest.approx(want, abs=1e-4)
    assert len({round(x, 3) for x in got}) > 1  # a constant output would not pass


def test_a_second_prompt_reuses_the_cached_prefix_with_the_same_scores(
    backend: LocalBackend,
) -> None:
    shared = "the lighthouse keeper counts the boats " * 6
    first = _prompt(backend, shared + "in the morning")
    second = _prompt(backend, shared + "at night")
    conts = [[5, 6], [9], [12, 13, 14]]
    backend.score_continuations(first, conts)
    hits = backend.prefix_hits
    got = backend.score_continuations(second, conts)
    assert backend.prefix_hits == hits + 1
    assert got == pytest.approx(reference_scores(backend.model, second, conts), abs=1e-4)


def test_scoring_after_generation_and_without_the_cache(tiny_model_dir) -> None:
    on = LocalBackend(tiny_model_dir, max_tokens=4)
    off = LocalBackend(tiny_model_dir, max_tokens=4, prefix_cache=False)
    prompt = _prompt(on, "a harbour full of small boats " * 6)
    on.generate_ids(prompt)  # leaves the prompt and its reply cached
    conts = [[3, 1], [2], [7, 7, 7]]
    a = on.score_continuations(prompt, conts)
    b = off.score_continuations(prompt, conts)
    assert a == pytest.approx(b, abs=1e-4)
    assert off.prefix_hits == 0


def test_the_prompt_forward_keeps_only_the_last_positions_logits(backend: LocalBackend) -> None:
    prompt = _prompt(backend, "the lighthouse keeper counts the boats " * 6)
    conts = [[5], [7, 9], [4, 4, 4]]
    shapes: list[tuple[int, ...]] = []
    hook = backend.model.register_forward_hook(
        lambda _m, _a, out: shapes.append(tuple(out.logits.shape))
    )
    try:
        got = backend.score_continuations(prompt, conts)
    finally:
        hook.remove()
    vocab = backend.model.config.vocab_size
    # the prompt: one position, not len(prompt); then one forward per candidate length
    assert shapes == [(1, 1, vocab), (1, 1, vocab), (1, 2, vocab)]
    assert got == pytest.approx(reference_scores(backend.model, prompt, conts), abs=1e-4)


def test_a_model_without_logits_to_keep_gets_full_logits(tiny_model_dir) -> None:
    class Wrapped(torch.nn.Module):  # hides the signature, as some wrappers do
        def __init__(self, inner: torch.nn.Module) -> None:
            super().__init__()
            self.inner, self.config = inner, inner.config
            self.generation_config = inner.generation_config

        def forward(self, *args, **kwargs):
            assert "logits_to_keep" not in kwargs
            return self.inner(*args, **kwargs)

    plain = LocalBackend(tiny_model_dir, max_tokens=4)
    wrapped = LocalBackend(Wrapped(plain.model), plain.tokenizer, max_tokens=4)
    prompt = _prompt(plain, "a harbour full of small boats " * 4)
    conts = [[3, 1], [2]]
    assert wrapped.score_continuations(prompt, conts) == pytest.approx(
        plain.score_continuations(prompt, conts), abs=1e-5
    )


def test_bad_scoring_input_is_refused(backend: LocalBackend) -> None:
    with pytest.raises(ValueError, match="non-empty prompt"):
        backend.score_continuations([], [[1]])
    with pytest.raises(ValueError, match="at least one token"):
        backend.score_continuations([1, 2, 3], [[1], []])


def test_dtype_by_name_and_bad_names(tiny_model_dir) -> None:
    b = LocalBackend(tiny_model_dir, dtype="bfloat16")
    assert next(b.model.parameters()).dtype == torch.bfloat16
    assert b.chat([{"role": "user", "content": "hello"}], max_tokens=2) is not None
    with pytest.raises(ValueError, match="floating torch dtype"):
        LocalBackend(tiny_model_dir, dtype="int8")
    with pytest.raises(ValueError, match="floating torch dtype"):
        LocalBackend(tiny_model_dir, dtype="float33")


def test_chat_batch_is_one_padded_generation_with_the_replies_of_chat(
    backend: LocalBackend, monkeypatch: pytest.MonkeyPatch
) -> None:
    conversations = [
        [{"role": "user", "content": text}]
        for text in ("boats", "the lighthouse keeper counts the boats " * 4, "a harbour")
    ]
    one_by_one = [backend.chat(m, max_tokens=6) for m in conversations]
    calls = []
    generate = backend.model.generate

    def counting(*args, **kwargs):
        calls.append(kwargs.get("attention_mask"))
        return generate(*args, **kwargs)

    monkeypatch.setattr(backend.model, "generate", counting)
    batched = backend.chat_batch(conversations, max_tokens=6)
    assert batched == one_by_one
    assert len(calls) == 1  # one generation for the three prompts
    assert calls[0].shape[0] == 3
    assert int(calls[0][0].sum()) < calls[0].shape[1]
    assert backend.chat_batch([]) == []
    sampled = backend.chat_batch(conversations[:2], max_tokens=3, temperature=0.7, seed=1)
    assert len(sampled) == 2
    assert len(calls) == 3


def test_batched_generation_refuses_bad_input(backend: LocalBackend) -> None:
    with pytest.raises(ValueError, match="at least one token"):
        backend.generate_batch_ids([[1, 2], []])
    with pytest.raises(ValueError, match="max_tokens"):
        backend.generate_batch_ids([[1, 2]], max_tokens=-1)
