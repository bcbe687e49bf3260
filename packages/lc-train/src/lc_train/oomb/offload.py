"""Host offload of key/value pages with prefetch to the compute device.

With ``ChunkRecurrentConfig(offload=True)`` the page pools of every layer (keys, values
and their gradients) live in host memory (pinned when CUDA is present). A
:class:`PageStager` keeps the past pages of ``resident_layers`` layers on the compute
device in *slots*. When an attention layer runs, its slot must hold that layer's past
pages; while it computes, the pages the next attention call will need (the next layer
in the forward pass, the previous layer in the backward pass) are copied into another
slot on a side CUDA stream. CUDA events order the three kinds of work:

- a slot is refilled only after the compute stream has finished reading it (the event
  recorded when it was released);
- the compute stream reads a slot only after its copy finished (the event recorded
  when the copy was queued);
- gradient pages written by a backward are copied back to host (on the side stream,
  after the backward's event) before anything reads the host gradient pages again
  (:meth:`PageStager.synchronize`, and the FIFO order of the side stream for later
  loads of the same pages).

On a CPU-only machine the same code runs with plain synchronous copies between host
tensors: the slots are real, separate buffers, so the bookkeeping (which pages a slot
holds, when gradients go back) is exercised and the results must equal training
without offload.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import torch

from lc_kernels.paged import PagedKV, PagePool

ROLES = ("k", "v", "gk", "gv")


class _Sync:
    """Side stream and events on CUDA; inert stand-ins on CPU."""

    def __init__(self, device: torch.device):
        self.cuda = device.type == "cuda"
        self.side = torch.cuda.Stream(device) if self.cuda else None

    def event(self) -> Any:
        """An event recorded on the current (compute) stream."""
        if not self.cuda:
            return None
        ev = torch.cuda.Event()
        ev.record()
        return ev

    @contextlib.contextmanager
    def on_side(self, after: Any) -> Iterator[Any]:
        """Run the body on the side stream after ``after``; yields a callable that
        records and returns the completion event."""
        if not self.cuda:
            yield lambda: None
            return
        assert self.side is not None
        if after is not None:
            self.side.wait_event(after)
        with torch.cuda.stream(self.side):

            def done() -> Any:
                ev = torch.cuda.Event()
                ev.record(self.side)
                return ev

            yield done

    def wait(self, event: Any) -> None:
        """Make the compute stream wait for ``event``."""
        if event is not None:
            torch.cuda.current_stream().wait_event(event)

    def synchronize(self) -> None:
        if self.side is not None:
            self.side.synchronize()


@dataclass
class _Slot:
    """Device buffers holding one layer's selected past pages (compacted to 0..n-1)."""

    tensors: dict[str, torch.Tensor]
    layer: int = -1
    pages: torch.Tensor | None = None  # physical host page ids held, in order
    has_grads: bool = False
    ready: Any = None  # event: the copy into the slot finished
    free: Any = None  # event: the compute stream finished with the slot

    def holds(self, layer: int, pages: torch.Tensor) -> bool:
        return (
            self.layer == layer
            and self.pages is not None
            and self.pages.numel() == pages.numel()
            and bool(torch.equal(self.pages, pages))
        )


@dataclass
class StagerStats:
    """Counters of a :class:`PageStager` (pages counted per role)."""

    acquires: int = 0
    prefetch_hits: int = 0
    pages_in: int = 0
    pages_out: int = 0


@dataclass
class PageStager:
    """Device-resident slots for the past pages of ``resident_layers`` layers.

    Args:
        pools: host page pools per role (``"k"``, ``"v"``, ``"gk"``, ``"gv"``), sharing
            page ids.
        device: the compute device the slots live on.
        capacity: pages per slot (the longest past one attention call needs).
        resident_layers: number of slots (the paper keeps 2 layers on the GPU).
    """

    pools: dict[str, PagePool]
    device: torch.device
    capacity: int
    resident_layers: int = 2
    stats: StagerStats = field(default_factory=StagerStats)

    def __post_init__(self) -> None:
        if self.resident_layers < 2:
            raise ValueError(
                f"resident_layers must be >= 2 (one slot computes while one loads), got "
                f"{self.resident_layers}"
            )
        self._sync = _Sync(self.device)
        shape = (self.capacity, *self.pools["k"].storage.shape[1:])
        dtype = self.pools["k"].storage.dtype
        self.slots = [
            _Slot({r: torch.zeros(shape, dtype=dtype, device=self.device) for r in ROLES})
            for _ in range(self.resident_layers)
        ]
        self._current: _Slot | None = None
        self._order: dict[int, int] = {}
        self._clock = 0
        self._pending: list[tuple[Any, torch.Tensor, dict[str, torch.Tensor]]] = []

    @property
    def bytes(self) -> int:
        """Bytes of the device slots."""
        return sum(t.numel() * t.element_size() for s in self.slots for t in s.tensors.values())

    # ----------------------------------------------------------------- copies
    def _load(self, slot: _Slot, layer: int, pages: torch.Tensor, grads: bool) -> None:
        """Queue the host -> device copy of ``pages`` (and their gradients) into ``slot``."""
        keep_kv = slot.holds(layer, pages)
        roles = ([] if keep_kv else ["k", "v"]) + (["gk", "gv"] if grads else [])
        if not roles:
            return
        if grads:
            self._flush(layer)
        n = pages.numel()
        with self._sync.on_side(slot.free) as done:
            for role in roles:
                host = self.pools[role].storage
                src = _host_pages(host, pages)
                slot.tensors[role][:n].copy_(src, non_blocking=True)
            slot.ready = done()
        self.stats.pages_in += n * len(roles)
        slot.layer, slot.pages = layer, pages
        slot.has_grads = grads or (keep_kv and slot.has_grads)

    def _write_back(self, slot: _Slot) -> None:
        """Queue the device -> host copy of the slot's gradient pages."""
        assert slot.pages is not None
        pages, n = slot.pages, slot.pages.numel()
        contiguous = _contiguous(pages)
        staged: dict[str, torch.Tensor] = {}
        with self._sync.on_side(slot.free) as done:
            for role in ("gk", "gv"):
                host = self.pools[role].storage
                if contiguous:
                    first = int(pages[0])
                    host[first : first + n].copy_(slot.tensors[role][:n], non_blocking=True)
                else:
                    buf = torch.empty(
                        slot.tensors[role][:n].shape,
                        dtype=host.dtype,
                        pin_memory=host.is_pinned(),
                    )
                    buf.copy_(slot.tensors[role][:n], non_blocking=True)
                    staged[role] = buf
            event = done()
        self.stats.pages_out += 2 * n
        for other in self.slots:  # their copies of this layer's gradients are now stale
            if other is not slot and other.layer == slot.layer:
                other.has_grads = False
        if staged:
            self._pending.append((event, pages, staged))

    def _flush(self, layer: int | None = None) -> None:
        """Finish write-backs to non-contiguous host pages (all of them)."""
        del layer  # pending write-backs are few; finish them all
        for event, pages, staged in self._pending:
            if event is not None:
                event.synchronize()
            for role, buf in staged.items():
                self.pools[role].storage.index_copy_(0, pages.to(buf.device), buf)
        self._pending.clear()

    # ------------------------------------------------------------------ API
    def _find(self, layer: int, pages: torch.Tensor) -> _Slot | None:
        return next((s for s in self.slots if s.holds(layer, pages)), None)

    def _victim(self) -> _Slot:
        """A slot other than the one in use, preferring empty ones, then the oldest use."""
        others = [s for s in self.slots if s is not self._current]
        empty = [s for s in others if s.pages is None]
        if empty:
            return empty[0]
        return min(others, key=lambda s: self._order.get(id(s), -1))

    def acquire(self, layer: int, pages: torch.Tensor, length: int, grads: bool) -> PagedKV:
        """The past of ``layer`` on the compute device.

        Args:
            layer: the attention layer.
            pages: ``[n]`` physical host page ids of the past, in logical order (all past
                pages, or a sparse selection).
            length: past tokens (``n * page_size`` or fewer on a partial last page).
            grads: also stage the gradient pages (backward): the returned
                :class:`~lc_kernels.paged.PagedKV` then accumulates into the slot, and
                :meth:`release` sends the gradients back to host.
        """
        pages = pages.to("cpu", torch.int64)
        if pages.numel() > self.capacity:
            raise ValueError(f"{pages.numel()} pages do not fit a slot of {self.capacity}")
        self.stats.acquires += 1
        slot = self._find(layer, pages)
        if slot is not None and (slot.has_grads or not grads):
            self.stats.prefetch_hits += 1
        else:
            slot = slot or self._victim()
            self._load(slot, layer, pages, grads)
        self._sync.wait(slot.ready)
        self._current = slot
        self._clock += 1
        self._order[id(slot)] = self._clock
        n = pages.numel()
        t = slot.tensors
        table = torch.arange(n, dtype=torch.int32, device=self.device)
        if grads:
            return PagedKV(t["k"][:n], t["v"][:n], table, length, t["gk"][:n], t["gv"][:n])
        return PagedKV(t["k"][:n], t["v"][:n], table, length)

    def release(self, grads_written: bool) -> None:
        """The compute stream is done with the current slot (after the ops just queued);
        with ``grads_written`` its gradient pages are copied back to host."""
        slot = self._current
        if slot is None:
            return
        slot.free = self._sync.event()
        if grads_written:
            self._write_back(slot)

    def prefetch(self, layer: int, pages: torch.Tensor, grads: bool) -> None:
        """Start loading ``layer``'s ``pages`` into another slot while the current one
        computes (a no-op when a slot already holds them)."""
        pages = pages.to("cpu", torch.int64)
        if pages.numel() == 0 or pages.numel() > self.capacity:
            return
        slot = self._find(layer, pages)
        if slot is not None and (slot.has_grads or not grads):
            return
        # a slot holding the pages gets only their gradients (queued after its release)
        self._load(slot or self._victim(), layer, pages, grads)

    def synchronize(self) -> None:
        """Wait until every gradient write-back reached host memory."""
        self._sync.synchronize()
        self._flush()

    def invalidate(self) -> None:
        """Forget what the slots hold (after host pages changed outside the stager)."""
        self.synchronize()
        for s in self.slots:
            s.layer, s.pages, s.has_grads = -1, None, False


def _contiguous(pages: torch.Tensor) -> bool:
    n = pages.numel()
    return n > 0 and int(pages[-1]) - int(pages[0]) + 1 == n and bool((pages.diff() == 1).all())


def _host_pages(host: torch.Tensor, pages: torch.Tensor) -> torch.Tensor:
    """``host[pages]`` without a copy when the ids are a contiguous run (pinned memory
    stays pinned, so the device copy is asynchronous)."""
    if _contiguous(pages):
        first = int(pages[0])
        return host[first : first + pages.numel()]
    out = host.index_select(0, pages)
    return out.pin_memory() if host.is_pinned() else out
