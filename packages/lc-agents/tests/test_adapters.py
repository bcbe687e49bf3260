"""LoRA adapters: merged plain-torch weights reproduce the peft model's logits."""

from __future__ import annotations

import copy
import json

import pytest
import torch
from transformers import LlamaConfig, LlamaForCausalLM

from lc_agents.adapters import (
    AdapterError,
    adapter_path,
    available_adapters,
    load_adapter,
    merge_adapter,
    model_fingerprint,
    save_adapter,
)

peft = pytest.importorskip("peft")


def tiny_llama(seed: int = 0) -> LlamaForCausalLM:
    torch.manual_seed(seed)
    cfg = LlamaConfig(
        vocab_size=97,
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=64,
    )
    return LlamaForCausalLM(cfg).eval()


def tiny_llama_for(tok) -> LlamaForCausalLM:
    """A one-layer random Llama over the vocabulary of ``tok`` (seed 0)."""
    torch.manual_seed(0)
    cfg = LlamaConfig(
        vocab_size=len(tok),
        hidden_size=16,
        intermediate_size=32,
        num_hidden_layers=1,
        num_attention_heads=2,
        num_key_value_heads=1,
        max_position_embeddings=1024,
        eos_token_id=tok.eos_token_id,
    )
    return LlamaForCausalLM(cfg).eval()


def lora(model: LlamaForCausalLM, seed: int = 1, r: int = 4, alpha: float = 8.0):
    torch.manual_seed(seed)
    cfg = peft.LoraConfig(
        r=r,
        lora_alpha=alpha,
        target_modules=["q_proj", "v_proj", "o_proj", "gate_proj", "down_proj"],
        init_lora_weights=False,  # random A and B: the adapter changes the outputs
        lora_dropout=0.0,
    )
    return peft.get_peft_model(model, cfg).eval()


def test_merged_logits_equal_peft_logits(tmp_path) -> None:
    base = tiny_llama()
    plain = copy.deepcopy(base)
    peft_model = lora(base)
    ids = torch.randint(0, 97, (2, 11), generator=torch.Generator().manual_seed(3))
    save_adapter(peft_model, tmp_path / "ad", description="test", dtype="float32")
    with torch.no_grad():
        want = peft_model(input_ids=ids).logits
        before = plain(input_ids=ids).logits
        merge_adapter(plain, tmp_path / "ad")
        got = plain(input_ids=ids).logits
    assert (want - before).abs().max() > 1e-3  # the adapter really changes the model
    torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-5)


def test_merge_equals_peft_merge_and_unload_in_float16_storage(tmp_path) -> None:
    base = tiny_llama()
    plain = copy.deepcopy(base)
    peft_model = lora(base, r=2, alpha=5.0)
    save_adapter(peft_model, tmp_path / "ad", dtype="float16")
    config, tensors = load_adapter(tmp_path / "ad")
    assert config["rank"] == 2
    assert config["alpha"] == 5.0
    assert all(t.dtype == torch.float16 for t in tensors.values())
    merged_peft = peft_model.merge_and_unload()
    merge_adapter(plain, tmp_path / "ad")
    for (name, w), (name2, w2) in zip(plain.named_parameters(), merged_peft.named_parameters()):
        assert name == name2
        # float16 storage of A, B: agreement to float16 precision of the delta
        torch.testing.assert_close(w, w2, rtol=0, atol=2e-3)


def test_fingerprint_mismatch_is_a_clear_error(tmp_path) -> None:
    save_adapter(lora(tiny_llama(seed=0)), tmp_path / "ad", base_model="tiny-0")
    other = tiny_llama(seed=5)  # same architecture, other weights
    assert model_fingerprint(other) != model_fingerprint(tiny_llama(seed=0))
    with pytest.raises(AdapterError, match="fingerprint"):
        merge_adapter(other, tmp_path / "ad")
    # the check can be turned off explicitly
    merge_adapter(other, tmp_path / "ad", check_fingerprint=False)


def test_fingerprint_ignores_float32_vs_bfloat16() -> None:
    model = tiny_llama()
    fp = model_fingerprint(model)
    assert model_fingerprint(copy.deepcopy(model).to(torch.bfloat16)) == fp


def test_bad_adapters_are_rejected(tmp_path) -> None:
    with pytest.raises(AdapterError, match="no adapter"):
        adapter_path(tmp_path / "missing")
    save_adapter(lora(tiny_llama()), tmp_path / "ad")
    cfg = json.loads((tmp_path / "ad" / "adapter.json").read_text())
    cfg["format"] = "something-else"
    (tmp_path / "ad" / "adapter.json").write_text(json.dumps(cfg))
    with pytest.raises(AdapterError, match="format"):
        load_adapter(tmp_path / "ad")
    with pytest.raises(AdapterError, match="no LoRA"):
        save_adapter(tiny_llama(), tmp_path / "none")


def test_unknown_adapter_name_lists_the_shipped_ones() -> None:
    with pytest.raises(AdapterError, match=r"not a shipped adapter \("):
        merge_adapter(tiny_llama(), "no-such-adapter")
    for name in available_adapters():  # every shipped adapter loads and is small
        config, tensors = load_adapter(name)
        assert sum(t.numel() * t.element_size() for t in tensors.values()) <= 10 * 2**20
        assert len(tensors) == 2 * config["modules"]


def test_local_backend_merges_an_adapter_on_request(tmp_path) -> None:
    from lc_agents.backends.local import LocalBackend
    from lc_agents.models import load_tokenizer

    tok = load_tokenizer("smollm2-135m-instruct")
    base = tiny_llama_for(tok)
    plain = copy.deepcopy(base)
    peft_model = lora(copy.deepcopy(base))
    save_adapter(peft_model, tmp_path / "ad", dtype="float32")
    ids = torch.tensor([tok.encode("Notes: the value is 7.")])
    backend = LocalBackend(plain, tok, adapter=tmp_path / "ad")
    with torch.no_grad():
        torch.testing.assert_close(
            backend.model(input_ids=ids).logits,
            peft_model(input_ids=ids).logits,
            rtol=1e-4,
            atol=1e-5,
        )
    other = LlamaForCausalLM(base.config).eval()  # fresh random weights: another base model
    with pytest.raises(AdapterError, match="fingerprint"):
        LocalBackend(other, tok, adapter=tmp_path / "ad")
    assert LocalBackend(copy.deepcopy(base), tok).adapter is None


def test_memagent_config_comes_from_the_adapter(tmp_path) -> None:
    from lc_agents.adapters import adapter_memagent_config

    save_adapter(
        lora(tiny_llama()), tmp_path / "ad", extra={"chunk_tokens": 96, "memory_tokens": 40}
    )
    cfg = adapter_memagent_config(tmp_path / "ad")
    assert (cfg.chunk_tokens, cfg.memory_tokens) == (96, 40)
    assert (cfg.memory_mode, cfg.copy_memory, cfg.copy_answer) == ("generate", False, False)
    save_adapter(lora(tiny_llama()), tmp_path / "plain", extra={"chunk_tokens": 96})
    with pytest.raises(AdapterError, match="records no MemAgent sizes"):
        adapter_memagent_config(tmp_path / "plain")


def test_cli_ask_with_an_adapter(tmp_path, tiny_model_dir) -> None:
    """``ask --adapter`` merges the adapter into the local model and prompts at its sizes."""
    from typer.testing import CliRunner

    from lc_agents.cli import app
    from lc_agents.models import load_model

    model, tok = load_model(str(tiny_model_dir))
    save_adapter(lora(model), tmp_path / "ad", extra={"chunk_tokens": 32, "memory_tokens": 8})
    doc = tmp_path / "doc.txt"
    doc.write_text("The river gauge read 5471234 on Monday. " * 12, encoding="utf-8")
    runner = CliRunner()
    args = ["ask", str(doc), "-q", "What did the gauge read?", "--adapter", str(tmp_path / "ad")]
    r = runner.invoke(app, [*args, "--model", str(tiny_model_dir)])
    assert r.exit_code == 0, r.output
    n_tokens = len(tok.encode(doc.read_text(), add_special_tokens=False))
    assert f"in {-(-n_tokens // 32)} chunks" in r.output  # the adapter's chunk size
    r = runner.invoke(app, [*args, "--endpoint", "http://127.0.0.1:9/v1", "--model", "m"])
    assert r.exit_code == 2
    assert "cannot apply to --endpoint" in r.output
    save_adapter(
        lora(tiny_llama()), tmp_path / "other", extra={"chunk_tokens": 32, "memory_tokens": 8}
    )
    args[-1] = str(tmp_path / "other")  # trained on another base model
    r = runner.invoke(app, [*args, "--model", str(tiny_model_dir)])
    assert r.exit_code == 1
    assert "fingerprint" in r.output
    assert "Traceback" not in r.output


def test_an_adapter_names_its_base_model() -> None:
    from lc_agents.adapters import adapter_base_model

    assert adapter_base_model("memagent-smollm2") == "smollm2-135m-instruct"
