"""Fixtures of lc-agents' unit tests: a tiny randomly initialised Llama and its tokenizer.

Nothing is downloaded: the tokenizer is a byte-level BPE trained here on a small corpus
(so decode(encode(text)) == text), with a ChatML chat template like SmolLM2's; the model
is a two-layer Llama built from a ``LlamaConfig`` with a fixed seed.
"""

from __future__ import annotations

import pathlib
import random
import sys

import pytest
import torch

# Helpers shared by test modules (fake_openai) live beside this file; pytest runs with
# --import-mode=importlib, which does not put the tests folder on sys.path.
sys.path.insert(0, str(pathlib.Path(__file__).parent))

CHATML = (
    "{% for message in messages %}<|im_start|>{{ message['role'] }}\n"
    "{{ message['content'] }}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)

WORDS = [
    "the",
    "a",
    "of",
    "and",
    "to",
    "in",
    "is",
    "was",
    "that",
    "it",
    "for",
    "on",
    "with",
    "as",
    "by",
    "at",
    "from",
    "this",
    "be",
    "are",
    "or",
    "an",
    "special",
    "magic",
    "number",
    "numbers",
    "for",
    "key",
    "value",
    "question",
    "answer",
    "notes",
    "section",
    "document",
    "river",
    "city",
    "apple",
    "stone",
    "quiet",
    "golden",
    "steady",
    "ancient",
    "empire",
    "none",
    "copper",
    "shore",
    "modest",
]


def corpus(seed: int = 0, sentences: int = 400) -> list[str]:
    rng = random.Random(seed)
    out = []
    for _ in range(sentences):
        words = [rng.choice(WORDS) for _ in range(rng.randint(4, 12))]
        out.append(" ".join(words).capitalize() + f". {rng.randint(0, 9999999)}\n")
    return out


@pytest.fixture(scope="session")
def tiny_tokenizer():
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=400,
        special_tokens=["<|endoftext|>", "<|im_start|>", "<|im_end|>"],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(corpus(), trainer=trainer)
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tok,
        bos_token="<|im_start|>",
        eos_token="<|im_end|>",
        pad_token="<|endoftext|>",
    )
    fast.chat_template = CHATML
    return fast


@pytest.fixture(scope="session")
def tiny_model_dir(tmp_path_factory, tiny_tokenizer) -> pathlib.Path:
    """A saved two-layer random Llama (with tokenizer) loadable by path."""
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    config = LlamaConfig(
        vocab_size=len(tiny_tokenizer),
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=4096,
        bos_token_id=tiny_tokenizer.bos_token_id,
        eos_token_id=tiny_tokenizer.eos_token_id,
        pad_token_id=tiny_tokenizer.pad_token_id,
    )
    model = LlamaForCausalLM(config)
    path = tmp_path_factory.mktemp("tiny-llama")
    model.save_pretrained(path)
    tiny_tokenizer.save_pretrained(path)
    return path


@pytest.fixture(scope="session")
def tiny_backend(tiny_model_dir):
    from lc_agents.backends.local import LocalBackend

    torch.set_num_threads(1)
    return LocalBackend(tiny_model_dir, max_tokens=16)


@pytest.fixture
def document() -> str:
    return "".join(corpus(seed=3, sentences=30))
