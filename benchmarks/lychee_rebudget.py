"""Role maps at other budgets from one LycheeDecode training run (no model needed).

``lychee_train.py`` stores each gate's averaged score (``score_late``, ranking key, and
``score_overall``, tie-break) in its ``*_train.json``; the hard map of any budget is the
same lexicographic selection
([select_by_rank][lc_attention.lychee.ranking.select_by_rank]) at another count. Writes
``<map stem>_b<N>.json`` beside the map for each ``--budgets N`` (N = gate units kept:
KV heads for a ``kv_head`` run, query heads otherwise; the first layer's count).

    uv run python benchmarks/lychee_rebudget.py docs/benchmarks/lc-attention-lychee/smollm2_roles_kv.json \
        --budgets 22 24 28
"""

from __future__ import annotations

import argparse
import json
import pathlib

import torch

from lc_attention.lychee import RoleMap
from lc_attention.lychee.ranking import select_by_rank


def rebudget(role_map: RoleMap, train: dict, budget: int) -> RoleMap:
    """The map ``train``'s scores give at ``budget`` gate units (layer 0 always kept)."""
    late = torch.tensor(train["score_late"], dtype=torch.float64)
    overall = torch.tensor(train["score_overall"], dtype=torch.float64)
    fixed = torch.zeros(late.shape, dtype=torch.bool)
    fixed[0] = True
    keep = select_by_rank(late, overall, budget, fixed)
    group = role_map.num_heads // late.shape[1]
    rows = keep.repeat_interleave(group, dim=1).tolist()
    meta = {**role_map.meta, "rebudget": {"units": budget, "of": late.numel()}}
    return RoleMap(tuple(tuple(bool(x) for x in r) for r in rows), role_map.fingerprint, meta)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("roles", type=pathlib.Path, help="a role map written by lychee_train.py")
    ap.add_argument("--budgets", type=int, nargs="+", required=True)
    args = ap.parse_args()
    rm = RoleMap.load(args.roles)
    train = json.loads((args.roles.parent / f"{args.roles.stem}_train.json").read_text())
    if train.get("score_late") is None:
        raise SystemExit(f"{args.roles.stem}_train.json holds no averaged scores")
    for b in args.budgets:
        out = rebudget(rm, train, b)
        path = out.save(args.roles.parent / f"{args.roles.stem}_b{b}.json")
        print(
            f"{path.name}: {out.num_retrieval} retrieval heads, {out.kv_heads_read()} KV heads read"
        )


if __name__ == "__main__":
    main()
