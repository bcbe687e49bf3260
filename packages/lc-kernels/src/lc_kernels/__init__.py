"""Triton GPU kernels with exact PyTorch references.

Every op lives in its own sub-package with ``reference.py`` (plain PyTorch, the test
oracle and the CPU path) and ``triton.py`` (the GPU kernels). Public functions take
``backend="auto" | "triton" | "torch"`` (a [Backend][lc_kernels.backend.Backend] member
or its string, the one vocabulary lc-attention uses too); ``auto`` means Triton on CUDA tensors and the
reference elsewhere. Attention tensors use the layout ``[batch, seq, heads, head_dim]``.

Ops: [selected_attention][lc_kernels.selected_attention.selected_attention] (the
selection branch of Native Sparse Attention, in the NSA and FSA loop orders),
[compressed_attention][lc_kernels.compressed_attention.compressed_attention] with
[select_blocks][lc_kernels.compressed_attention.select_blocks] (the compression branch
and top-k block selection) and
[sliding_window_attention][lc_kernels.sliding_window.sliding_window_attention]; paged
key/value memory in [lc_kernels.paged][] (page pools, gather/scatter, chunk attention over
a paged past with gradients into gradient pages, Triton on CUDA); one-step decode ops for hybrid-head
sparse decoding in [lc_kernels.decode][] (exact block-wise top-k, full attention that
also returns each head's top-k positions, attention over gathered positions). Importing
``lc_kernels`` imports torch but not triton (the kernels load on first use).
"""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version

try:
    __version__: str = version("lc-kernels")
except PackageNotFoundError:  # running from a source tree that was never installed
    __version__ = "0.0.0+unknown"

from lc_kernels.backend import Backend, parse_backend

# The functions shadow the sub-packages of the same name on purpose: the op is the API.
from lc_kernels.compressed_attention import (
    compressed_attention,
    mean_pool_compress,
    num_compressed,
    select_blocks,
)
from lc_kernels.decode import (
    block_topk,
    full_decode_attention,
    retrieval_decode_attention,
    sparse_decode_attention,
)
from lc_kernels.paged import (
    PagedKV,
    PageLayout,
    PagePool,
    paged_chunk_attention,
    paged_chunk_attention_backward,
    paged_chunk_attention_forward,
    paged_gather,
    paged_scatter,
)
from lc_kernels.selected_attention import (
    dense_causal_attention_reference,
    selected_attention,
    selected_attention_reference,
)
from lc_kernels.sliding_window import sliding_window_attention

__all__ = [
    "Backend",
    "PageLayout",
    "PagePool",
    "PagedKV",
    "__version__",
    "block_topk",
    "compressed_attention",
    "dense_causal_attention_reference",
    "full_decode_attention",
    "mean_pool_compress",
    "num_compressed",
    "paged_chunk_attention",
    "paged_chunk_attention_backward",
    "paged_chunk_attention_forward",
    "paged_gather",
    "paged_scatter",
    "parse_backend",
    "retrieval_decode_attention",
    "select_blocks",
    "selected_attention",
    "selected_attention_reference",
    "sliding_window_attention",
    "sparse_decode_attention",
]
