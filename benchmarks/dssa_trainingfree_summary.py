"""One figure of DSSA without training: NIAH hits and perplexity per setting, vs dense.

Reads the result files of ``dssa_quality.py`` runs under
``docs/benchmarks/lc-attention-dssa/`` (each setting's numbers come from the file and
mode named in ``SOURCES``; a setting ran on the same NIAH items and perplexity texts as
the dense mode it is compared with) and writes ``trainingfree_summary.png`` and
``trainingfree_summary.json`` there. Files that are missing are left out of the figure.

    uv run python benchmarks/dssa_trainingfree_summary.py
"""

from __future__ import annotations

import functools
import json
import math
import pathlib
from typing import Any

OUT = pathlib.Path(__file__).resolve().parents[1] / "docs/benchmarks/lc-attention-dssa"

# (model and length, setting) -> (NIAH file, mode), (perplexity file, mode); setting
# "dense" is the reference of its group.
Source = tuple[str, str] | None
SOURCES: dict[tuple[str, str], tuple[Source, Source]] = {
    ("SmolLM2 4K", "dense"): (
        ("niah_granularity_smollm2_4k.json", "dense"),
        ("ppl_granularity_smollm2_4k.json", "dense"),
    ),
    ("SmolLM2 4K", "small() 32/16"): (
        ("niah_granularity_smollm2_4k.json", "dssa"),
        ("ppl_granularity_smollm2_4k.json", "dssa"),
    ),
    ("SmolLM2 4K", "8/8"): (
        ("niah_granularity_smollm2_4k_c8s8.json", "c8s8"),
        ("ppl_granularity_smollm2_4k_c8s8.json", "c8s8"),
    ),
    ("SmolLM2 4K", "4/4, 64-query groups"): (
        ("niah_granularity_smollm2_4k.json", "c4s4"),
        ("ppl_granularity_smollm2_4k.json", "c4s4"),
    ),
    ("SmolLM2 4K", "training_free() (per query)"): (
        ("quality_pertoken_smollm2_4k.json", "tftok16"),
        ("quality_pertoken_smollm2_4k.json", "tftok16"),
    ),
    ("Gemma-3 4K", "dense"): (
        ("niah_granularity_gemma3_4k.json", "dense"),
        ("ppl_granularity_gemma3_4k.json", "dense"),
    ),
    ("Gemma-3 4K", "small() 32/16"): (
        ("niah_granularity_gemma3_4k.json", "dssa"),
        ("ppl_granularity_gemma3_4k.json", "dssa"),
    ),
    ("Gemma-3 4K", "8/8"): (
        ("niah_granularity_gemma3_4k.json", "c8s8"),
        ("ppl_granularity_gemma3_4k.json", "c8s8"),
    ),
    ("Gemma-3 4K", "4/4, 64-query groups"): (
        ("niah_granularity_gemma3_4k.json", "c4s4"),
        ("ppl_granularity_gemma3_4k.json", "c4s4"),
    ),
    ("Gemma-3 4K", "training_free() (per query)"): (
        ("quality_pertoken_gemma3_4k.json", "tftok16"),
        ("quality_pertoken_gemma3_4k.json", "tftok16"),
    ),
    ("SmolLM2 8K", "dense"): (
        ("granularity_smollm2_8k.json", "dense"),
        ("granularity_smollm2_8k.json", "dense"),
    ),
    ("SmolLM2 8K", "small() 32/16"): (
        ("granularity_smollm2_8k.json", "dssa"),
        ("granularity_smollm2_8k.json", "dssa"),
    ),
    ("SmolLM2 8K", "4/4, 64-query groups"): (
        ("granularity_smollm2_8k.json", "c4s4"),
        ("granularity_smollm2_8k.json", "c4s4"),
    ),
    ("SmolLM2 8K", "4/4 groups, topk=32"): (
        ("budget_trainingfree_smollm2_8k.json", "tf32"),
        ("budget_trainingfree_smollm2_8k.json", "tf32"),
    ),
    ("SmolLM2 8K", "4/4 groups, topk=48"): (
        ("budget_trainingfree_smollm2_8k.json", "tf48"),
        ("budget_trainingfree_smollm2_8k.json", "tf48"),
    ),
    ("SmolLM2 8K", "4/4 groups, topk=64"): (
        ("budget_trainingfree_smollm2_8k_tf64.json", "tf64"),
        ("budget_trainingfree_smollm2_8k_tf64.json", "tf64"),
    ),
    ("SmolLM2 8K", "training_free() (per query)"): (
        ("niah_pertoken_smollm2_8k_k16.json", "tftok16"),
        ("ppl_pertoken_smollm2_8k.json", "tftok16"),
    ),
    ("SmolLM2 8K", "training_free(topk=32)"): (
        ("niah_pertoken_smollm2_8k_k32.json", "tftok32"),
        ("ppl_pertoken_smollm2_8k.json", "tftok32"),
    ),
    ("SmolLM2 8K", "4/4, 16-query groups"): (("groups_smollm2_8k.json", "qb16"), None),
    ("SmolLM2 8K", "4/4, 8-query groups"): (("groups_smollm2_8k.json", "qb8"), None),
    ("Gemma-3 8K", "dense"): (
        ("quality_gemma3_4k8k.json", "dense"),
        ("ppl_pertoken_gemma3_8k.json", "dense"),
    ),
    ("Gemma-3 8K", "small() 32/16"): (("quality_gemma3_4k8k.json", "dssa"), None),
    ("Gemma-3 8K", "8/8"): (("niah_granularity_gemma3_8k_c8s8.json", "c8s8"), None),
    ("Gemma-3 8K", "4/4, 64-query groups"): (
        ("niah_granularity_gemma3_8k_c4s4.json", "c4s4"),
        ("ppl_groups_gemma3_8k.json", "g64"),
    ),
    ("Gemma-3 8K", "4/4 groups, topk=32"): (
        ("budget_trainingfree_gemma3_8k_tf32.json", "tf32"),
        None,
    ),
    ("Gemma-3 8K", "training_free() (per query)"): (
        ("niah_pertoken_gemma3_8k.json", "tftok16"),
        ("ppl_pertoken_gemma3_8k.json", "tftok16"),
    ),
    ("Gemma-3 8K", "training_free(topk=32)"): (
        None,
        ("ppl_pertoken_gemma3_8k_k32.json", "tftok32"),
    ),
    ("Gemma-3 16K", "dense"): (("quality_gemma3.json", "dense"), ("quality_gemma3.json", "dense")),
    ("Gemma-3 16K", "small() 32/16"): (
        ("quality_gemma3.json", "dssa"),
        ("quality_gemma3.json", "dssa"),
    ),
    ("Gemma-3 16K", "4/4, 64-query groups"): (
        ("quality_trainingfree_gemma3_16k.json", "tf"),
        ("quality_trainingfree_gemma3_16k.json", "tf"),
    ),
    ("Gemma-3 16K", "training_free() (per query)"): (
        ("quality_pertoken_gemma3_16k.json", "tftok16"),
        ("quality_pertoken_gemma3_16k.json", "tftok16"),
    ),
}


@functools.cache
def _rows(name: str) -> list[dict[str, Any]]:
    """The rows of a result file (each file is read once)."""
    return json.loads((OUT / name).read_text())["rows"]


def _mode(source: Source, length: int) -> dict[str, Any] | None:
    """The mode's result in the row of ``length`` of its file, with the row's item count."""
    if source is None or not (OUT / source[0]).exists():
        return None
    rows = [r for r in _rows(source[0]) if r["length"] == length]
    if len(rows) != 1:
        raise ValueError(f"{source[0]}: expected one row of length {length}, got {len(rows)}")
    if source[1] not in rows[0]:
        raise ValueError(f"{source[0]}: no mode {source[1]!r} at length {length}")
    return {"n": rows[0]["n"], **rows[0][source[1]]}


def collect() -> list[dict[str, Any]]:
    """One record per (group, setting) with NIAH hits and perplexity, and dense's."""
    out = []
    for (group, setting), (niah_src, ppl_src) in SOURCES.items():
        length = 1024 * int(group.split()[-1].removesuffix("K"))
        niah, ppl = _mode(niah_src, length), _mode(ppl_src, length)
        dense_niah_src, dense_ppl_src = SOURCES[(group, "dense")]
        dn, dp = _mode(dense_niah_src, length), _mode(dense_ppl_src, length)
        if niah is None and ppl is None:
            continue
        rec: dict[str, Any] = {"group": group, "setting": setting}
        if niah is not None and dn is not None:
            if niah["n"] != dn["n"]:
                raise ValueError(f"{group} {setting}: {niah['n']} NIAH items, dense {dn['n']}")
            rec |= {"niah_hits": niah["niah_hits"], "dense_hits": dn["niah_hits"], "n": niah["n"]}
        if ppl is not None and dp is not None and not math.isnan(ppl.get("ppl", math.nan)):
            rec |= {"ppl": ppl["ppl"], "dense_ppl": dp["ppl"]}
            rec["ppl_change"] = ppl["ppl"] / dp["ppl"] - 1
        out.append(rec)
    return out


def plot(records: list[dict[str, Any]], path: pathlib.Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    groups = list(dict.fromkeys(r["group"] for r in records))
    settings = list(dict.fromkeys(s for _, s in SOURCES))
    colors = dict(zip(settings, plt.get_cmap("tab20").colors, strict=False))
    fig, (ax_n, ax_p) = plt.subplots(2, 1, figsize=(10, 7), sharex=True)
    width = 0.8 / max(1, max(sum(r["group"] == g for r in records) for g in groups))
    labelled: set[str] = set()  # one legend entry per setting
    for gi, group in enumerate(groups):
        recs = [r for r in records if r["group"] == group]
        for si, rec in enumerate(recs):
            x = gi + (si - (len(recs) - 1) / 2) * width
            label = rec["setting"]
            kw = {"color": colors[label], "label": None if label in labelled else label}
            labelled.add(label)
            if "niah_hits" in rec:
                acc = rec["niah_hits"] / rec["n"]
                ax_n.bar(x, acc, width, **kw)
                ax_n.text(x, acc + 0.01, f"{rec['niah_hits']}/{rec['n']}", ha="center",
                          va="bottom", fontsize=6)  # fmt: skip
            if "ppl_change" in rec and rec["setting"] != "dense":
                ax_p.bar(x, 100 * rec["ppl_change"], width, **kw)
    ax_n.set_ylabel("NIAH accuracy")
    ax_n.set_ylim(0, 1.25)
    handles, labels = ax_n.get_legend_handles_labels()
    fig.legend(handles, labels, fontsize=7, ncol=4, loc="lower center")
    ax_p.axhline(2.0, color="grey", ls="--", lw=0.8)
    ax_p.axhline(0.0, color="grey", lw=0.8)
    ax_p.set_ylabel("perplexity vs dense (%)")
    ax_p.set_xticks(range(len(groups)), groups)
    fig.suptitle("DSSA without training: settings vs dense (same items and texts)", fontsize=10)
    fig.tight_layout(rect=(0, 0.1, 1, 1))
    fig.savefig(path, dpi=120)
    plt.close(fig)


def main() -> None:
    records = collect()
    (OUT / "trainingfree_summary.json").write_text(json.dumps(records, indent=2))
    plot(records, OUT / "trainingfree_summary.png")
    for r in records:
        print(r)
    print(f"wrote {OUT / 'trainingfree_summary.png'}")


if __name__ == "__main__":
    main()
