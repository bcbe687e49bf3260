"""Multi-conversation MemAgent rollouts, oracle traces and the DAPO/SFT trainer steps.

A tiny random Llama with the embedded SmolLM2 tokenizer (real chat template) plays the
policy; rewards come from lc-evals scorers.
"""

from __future__ import annotations

import copy
import math

import pytest
import torch
from transformers import LlamaConfig, LlamaForCausalLM

lc_evals = pytest.importorskip("lc_evals")
pytest.importorskip("lc_agents")

from lc_agents.memagent import MemAgentConfig  # noqa: E402
from lc_agents.models import load_tokenizer  # noqa: E402
from lc_train.rl import DAPOConfig, clipped_token_objective, token_level_mean  # noqa: E402
from lc_train.rl.memagent import Episode, Turn, rollout, rollout_group, run_episode  # noqa: E402
from lc_train.rl.traces import OracleBackend, oracle_replies, oracle_turns, relevant_facts  # noqa: E402
from lc_train.rl.trainer import (  # noqa: E402
    build_turn_batch,
    completion_logps,
    dapo_step,
    load_checkpoint,
    pack_turns,
    save_checkpoint,
    sft_step,
)

torch.set_num_threads(1)


@pytest.fixture(scope="module")
def tok():
    return load_tokenizer("smollm2-135m-instruct")


def tiny_policy(tok, seed: int = 0) -> LlamaForCausalLM:
    torch.manual_seed(seed)
    cfg = LlamaConfig(
        vocab_size=len(tok),
        hidden_size=16,
        intermediate_size=32,
        num_hidden_layers=2,
        num_attention_heads=2,
        num_key_value_heads=1,
        max_position_embeddings=2048,
        eos_token_id=tok.eos_token_id,
    )
    return LlamaForCausalLM(cfg).eval()


def small_config(chunk: int = 128) -> MemAgentConfig:
    return MemAgentConfig(
        chunk_tokens=chunk,
        memory_tokens=6,
        answer_tokens=4,
        copy_memory=False,
        copy_answer=False,
    )


def niah(tok, task: str = "niah_single", length: int = 400, n: int = 1, seed: int = 0, **kw):
    kw = {"haystack": "essay", "value_kind": "number", **kw}
    return lc_evals.generate(task, n=n, length=length, seed=seed, tokenizer=tok, **kw)


def test_rollout_records_one_turn_per_chunk_plus_answer(tok) -> None:
    model = tiny_policy(tok)
    item = niah(tok)[0]
    cfg = small_config()
    n_chunks = math.ceil(len(tok.encode(item.context, add_special_tokens=False)) / 128)
    ep = rollout(model, tok, item, cfg, seed=3)
    assert [t.kind for t in ep.turns] == ["update"] * n_chunks + ["answer"]
    assert ep.reward in (0.0, 1.0)
    for t in ep.turns:
        assert t.logps is not None
        assert 1 <= len(t.completion_ids) <= 6
        assert all(lp <= 0 for lp in t.logps)
    # deterministic under a seed, different under another
    again = rollout(model, tok, item, cfg, seed=3)
    assert [t.completion_ids for t in again.turns] == [t.completion_ids for t in ep.turns]
    other = rollout(model, tok, item, cfg, seed=4)
    assert [t.completion_ids for t in other.turns] != [t.completion_ids for t in ep.turns]


def test_recorded_logps_equal_teacher_forced_logps(tok) -> None:
    """KV-cached sampling logps == one full forward over prompt + completion."""
    model = tiny_policy(tok)
    item = niah(tok)[0]
    for temperature in (1.0, 0.7):
        ep = rollout(model, tok, item, small_config(), seed=1, temperature=temperature)
        ids, attn, target, old = pack_turns(ep.turns, pad_id=tok.eos_token_id)
        with torch.no_grad():
            logp = completion_logps(model, ids, attn, temperature)
        torch.testing.assert_close(logp[target], old[target], rtol=1e-4, atol=1e-4)


def test_memory_update_prompts_carry_the_previous_memory(tok) -> None:
    """Turn k's prompt shows the memory written at turn k-1 (multi-conversation chain)."""
    model = tiny_policy(tok)
    ep = rollout(model, tok, niah(tok)[0], small_config(), seed=0)
    assert len(ep.memories) == len(ep.turns) - 1
    for memory, cur in zip(ep.memories, ep.turns[1:]):
        shown = memory if memory else small_config().initial_memory
        assert f"\n{shown}\n" in tok.decode(list(cur.prompt_ids))


def test_copy_constrained_config_is_rejected(tok) -> None:
    with pytest.raises(ValueError, match="copy_memory=False"):
        rollout(tiny_policy(tok), tok, niah(tok)[0], MemAgentConfig(), seed=0)


def test_group_rollout_needs_a_baseline(tok) -> None:
    with pytest.raises(ValueError, match="group_size"):
        rollout_group(tiny_policy(tok), tok, niah(tok)[0], small_config(), group_size=1, seed=0)


# ------------------------------------------------------------------ oracle traces
def test_relevant_facts_pick_the_queried_needles_only(tok) -> None:
    item = niah(tok, "niah_multikey", length=600, num_distractors=3)[0]
    facts = relevant_facts(item)
    assert len(facts) == 1
    assert item.answers[0] in facts[0]
    assert len(item.metadata["needles"]) == 4
    vt = lc_evals.generate("variable_tracking", n=1, length=600, seed=0, tokenizer=tok)[0]
    vt_facts = relevant_facts(vt)
    assert len(vt_facts) == 5
    assert vt_facts[0].endswith(f"= {vt.metadata['value']} .")


def test_oracle_turns_write_the_needle_then_answer(tok) -> None:
    cfg = MemAgentConfig.plain(chunk_tokens=128, memory_tokens=96)
    for item in niah(tok, n=3, length=600, seed=2):
        out = oracle_replies(item, tok, cfg)
        if out is None:
            continue
        updates, answer = out
        turns = oracle_turns(item, tok, cfg)
        assert turns is not None
        assert len(turns) == len(updates) + 1
        assert turns[-1].kind == "answer"
        assert tok.decode(list(turns[-1].completion_ids), skip_special_tokens=True) == answer
        assert turns[-1].completion_ids[-1] == tok.eos_token_id
        written = [u for u in updates if u != "none"]
        assert written == [relevant_facts(item)[0]]
        k = updates.index(written[0])
        # the update that writes the needle sees it in its chunk; the answer prompt shows it
        assert written[0] in tok.decode(list(turns[k].prompt_ids))
        assert written[0] in tok.decode(list(turns[-1].prompt_ids))
        return
    pytest.fail("every generated item had its needle split across chunks")


def test_oracle_is_none_when_a_fact_straddles_chunks(tok) -> None:
    item = niah(tok, length=600)[0]
    needle = relevant_facts(item)[0]
    ids = tok.encode(item.context, add_special_tokens=False)
    # find a chunk size that cuts the needle in two
    start = item.context.index(needle)
    prefix_tokens = len(
        tok.encode(item.context[: start + len(needle) // 2], add_special_tokens=False)
    )
    cfg = MemAgentConfig.plain(chunk_tokens=prefix_tokens, memory_tokens=96)
    assert len(ids) > prefix_tokens
    assert oracle_replies(item, tok, cfg) is None


def test_oracle_backend_respects_the_budget(tok) -> None:
    item = niah(tok)[0]
    backend = OracleBackend(tok, ["x " * 50] * 20)
    with pytest.raises(ValueError, match="budget"):
        run_episode(backend, item, small_config())


# ------------------------------------------------------------------ batches and steps
def _turn(prompt, completion, kind="update", logps=None) -> Turn:
    return Turn(tuple(prompt), tuple(completion), kind, None if logps is None else tuple(logps))


def test_build_turn_batch_drops_flat_groups_and_broadcasts() -> None:
    def ep(reward: float, n_turns: int, tag: int) -> Episode:
        turns = [_turn([tag, i + 1], [5]) for i in range(n_turns - 1)] + [
            _turn([tag], [6], "answer")
        ]
        return Episode(f"i{tag}", turns, "a", reward)

    groups = [
        [ep(1.0, 3, 1), ep(0.0, 2, 2), ep(0.0, 4, 3), ep(1.0, 1, 4)],
        [ep(1.0, 2, 5), ep(1.0, 2, 6), ep(1.0, 2, 7), ep(1.0, 2, 8)],  # all equal: dropped
    ]
    batch = build_turn_batch(groups, std_eps=1e-12)
    assert batch is not None
    assert batch.kept_groups.tolist() == [True, False]
    assert len(batch.turns) == 3 + 2 + 4 + 1
    expected = [1.0] * 3 + [-1.0] * 2 + [-1.0] * 4 + [1.0]
    torch.testing.assert_close(batch.advantages, torch.tensor(expected))
    assert batch.turns[0].prompt_ids[0] == 1
    assert batch.turns[-1].prompt_ids == (4,)
    assert build_turn_batch([groups[1]]) is None


def _random_turns(tok, n: int = 5, seed: int = 0, logps: bool = True) -> list[Turn]:
    g = torch.Generator().manual_seed(seed)
    out = []
    for i in range(n):
        p = torch.randint(0, len(tok), (int(torch.randint(3, 9, (1,), generator=g)),), generator=g)
        c = torch.randint(0, len(tok), (int(torch.randint(1, 6, (1,), generator=g)),), generator=g)
        lp = (-torch.rand(len(c), generator=g) * 12).tolist() if logps else None
        out.append(_turn(p.tolist(), c.tolist(), "answer" if i == n - 1 else "update", lp))
    return out


def _grads(model) -> torch.Tensor:
    return torch.cat([p.grad.reshape(-1) for p in model.parameters() if p.grad is not None])


def test_dapo_step_is_the_token_level_mean_and_micro_batch_invariant(tok) -> None:
    model = tiny_policy(tok)
    turns = _random_turns(tok)
    adv = torch.tensor([1.0, -0.5, 2.0, 0.0, -1.0])
    cfg = DAPOConfig(max_length=64, overlong_cache=8)
    stats = dapo_step(model, None, turns, adv, cfg, micro_batch=5)
    g_full = _grads(model).clone()
    model.zero_grad()
    dapo_step(model, None, turns, adv, cfg, micro_batch=2)
    torch.testing.assert_close(_grads(model), g_full, rtol=1e-4, atol=1e-7)
    # reference: dapo.py's pieces on the padded batch
    ids, attn, target, old = pack_turns(turns)
    with torch.no_grad():
        logp = completion_logps(model, ids, attn)
    per_tok = clipped_token_objective(logp, old, adv[:, None].expand_as(logp), 0.2, 0.28)
    ref = token_level_mean(per_tok, target.float())
    assert math.isclose(stats["loss"], float(ref), rel_tol=1e-4)
    assert stats["tokens"] == sum(len(t.completion_ids) for t in turns)
    assert 0.0 <= stats["clip_frac"] <= 1.0


def test_dapo_step_moves_logps_with_the_advantage_sign(tok) -> None:
    model = tiny_policy(tok)
    turns = _random_turns(tok, n=2, logps=False)  # on-policy: ratio 1
    adv = torch.tensor([1.0, -1.0])
    ids, attn, target, _ = pack_turns(turns)

    def seq_logp() -> torch.Tensor:
        with torch.no_grad():
            lp = completion_logps(model, ids, attn)
        return (lp * target).sum(dim=1)

    before = seq_logp()
    opt = torch.optim.SGD(model.parameters(), lr=0.5)
    dapo_step(model, opt, turns, adv, DAPOConfig(), max_grad_norm=None)
    after = seq_logp()
    assert after[0] > before[0]
    assert after[1] < before[1]


def test_sft_step_lowers_the_completion_nll(tok) -> None:
    model = tiny_policy(tok)
    turns = _random_turns(tok, n=3, logps=False)
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    losses = [sft_step(model, opt, turns)["loss"] for _ in range(8)]
    assert losses[-1] < losses[0] - 0.5
    assert math.isclose(losses[0], math.log(len(tok)), rel_tol=0.05)  # random init: ~uniform


def test_checkpoint_resume_matches_an_uninterrupted_run(tok, tmp_path) -> None:
    turns = _random_turns(tok, n=3, logps=False)

    def make():
        model = tiny_policy(tok)
        for name, p in model.named_parameters():
            p.requires_grad_("layers.1" in name)  # a subset is trainable, as with LoRA
        opt = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=1e-2)
        return model, opt

    straight, opt = make()
    for _ in range(2):
        sft_step(straight, opt, turns)
    first, opt1 = make()
    sft_step(first, opt1, turns)
    save_checkpoint(tmp_path / "c.pt", first, opt1, step=1, extra={"note": "x"})
    resumed, opt2 = make()
    meta = load_checkpoint(tmp_path / "c.pt", resumed, opt2)
    assert meta == {"step": 1, "extra": {"note": "x"}}
    sft_step(resumed, opt2, turns)
    for a, b in zip(straight.parameters(), resumed.parameters()):
        torch.testing.assert_close(a, b)
    wrong = copy.deepcopy(resumed)
    for p in wrong.parameters():
        p.requires_grad_(True)
    with pytest.raises(ValueError, match="trainable parameters"):
        load_checkpoint(tmp_path / "c.pt", wrong)
