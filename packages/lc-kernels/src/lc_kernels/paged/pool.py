"""Fixed-size page pools for key/value tensors and their gradients.

A :class:`PagePool` owns one preallocated tensor of ``num_pages`` pages, each page
holding ``page_size`` tokens of one layer's keys *or* values for the whole batch:
``storage[page] -> [batch, kv_heads, page_size, head_dim]``. Sequences are described by a
page table (a list of physical page ids in logical order), so memory never fragments:
freeing a sequence returns whole pages to the free list and any later sequence reuses
them.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch


@dataclass(frozen=True)
class PageLayout:
    """Shape of one page: ``[batch, kv_heads, page_size, head_dim]`` of ``dtype``."""

    batch: int
    kv_heads: int
    page_size: int
    head_dim: int
    dtype: torch.dtype = torch.float32

    def __post_init__(self) -> None:
        for name in ("batch", "kv_heads", "page_size", "head_dim"):
            value = getattr(self, name)
            if not isinstance(value, int) or value < 1:
                raise ValueError(f"PageLayout.{name} must be a positive int, got {value!r}")

    @property
    def page_bytes(self) -> int:
        """Bytes of one page."""
        itemsize = torch.empty((), dtype=self.dtype).element_size()
        return self.batch * self.kv_heads * self.page_size * self.head_dim * itemsize


class PagePool:
    """A preallocated pool of pages with a free list.

    Args:
        layout: the shape of one page.
        num_pages: capacity of the pool.
        device: where the pages live (``"cpu"`` for host offload; pinned when CUDA exists).

    Example:
        >>> pool = PagePool(PageLayout(1, 2, 4, 8), num_pages=6)
        >>> table = pool.allocate(3)            # three physical pages for one sequence
        >>> pool.free(table); pool.num_free
        6
    """

    def __init__(self, layout: PageLayout, num_pages: int, device: torch.device | str = "cpu"):
        if num_pages < 1:
            raise ValueError(f"num_pages must be >= 1, got {num_pages}")
        self.layout = layout
        device = torch.device(device)
        shape = (num_pages, layout.batch, layout.kv_heads, layout.page_size, layout.head_dim)
        pin = device.type == "cpu" and torch.cuda.is_available()
        self.storage = torch.zeros(shape, dtype=layout.dtype, device=device, pin_memory=pin)
        self._free = list(range(num_pages - 1, -1, -1))

    @property
    def num_pages(self) -> int:
        return self.storage.shape[0]

    @property
    def num_free(self) -> int:
        return len(self._free)

    def allocate(self, n: int) -> list[int]:
        """Take ``n`` pages from the free list (zeroed); raises ``MemoryError`` if short."""
        if n > len(self._free):
            raise MemoryError(
                f"page pool exhausted: asked for {n} pages, {len(self._free)} of "
                f"{self.num_pages} free"
            )
        pages = [self._free.pop() for _ in range(n)]
        if pages:
            self.storage[pages] = 0
        return pages

    def free(self, pages: list[int]) -> None:
        """Return pages to the free list."""
        in_use = set(range(self.num_pages)) - set(self._free)
        bad = [p for p in pages if p not in in_use]
        if bad:
            raise ValueError(f"pages {bad} are not allocated")
        self._free.extend(reversed(pages))
