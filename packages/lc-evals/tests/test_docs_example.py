"""The guide's example runs and prints what the guide says it prints."""

from __future__ import annotations

import contextlib
import io
import pathlib
import re

import pytest

import lc_evals

GUIDE = pathlib.Path(__file__).resolve().parents[3] / "docs" / "packages" / "lc-evals.md"


@pytest.mark.skipif(not GUIDE.exists(), reason="the docs tree is not beside this checkout")
def test_guide_example(tmp_path, monkeypatch) -> None:
    text = GUIDE.read_text()
    code = re.findall(r"```python\n(.*?)```", text, re.S)[0]
    expected = re.findall(r"```text\n(.*?)```", text, re.S)[0]
    monkeypatch.chdir(tmp_path)
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(compile(code, str(GUIDE), "exec"), {})
    assert out.getvalue() == expected
    assert (tmp_path / "half_heatmap.png").read_bytes()[:4] == b"\x89PNG"


def test_make_suite_gives_depthless_tasks_one_cell_per_length() -> None:
    suite = lc_evals.make_suite(
        ["niah_single", "minmax"], [800, 1600], n=1, seed=0, depths=[0.0, 1.0]
    )
    assert [i.id for i in suite if i.task == "minmax"] == ["minmax/L800/0", "minmax/L1600/0"]
    assert len([i for i in suite if i.task == "niah_single"]) == 4
    with pytest.raises(ValueError, match="at least one task"):
        lc_evals.make_suite([], [800], n=1, seed=0)
