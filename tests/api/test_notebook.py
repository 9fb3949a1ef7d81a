"""examples/quickstart.ipynb: committed with its outputs, what the README's Python block shows, and
(slow) executed end to end with nbclient on the environment's own ipykernel, offline."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
NOTEBOOK = REPO / "examples" / "quickstart.ipynb"


def _code_cells(nb: dict) -> list[dict]:
    return [c for c in nb["cells"] if c["cell_type"] == "code"]


def _source(cell: dict) -> str:
    src = cell["source"]
    return "".join(src) if isinstance(src, list) else src


def _html_outputs(nb: dict) -> list[str]:
    out = []
    for cell in _code_cells(nb):
        for o in cell.get("outputs", []):
            html = o.get("data", {}).get("text/html")
            if html is not None:
                out.append("".join(html) if isinstance(html, list) else html)
    return out


def _errors(nb: dict) -> list[str]:
    return [f"cell {i}: {o.get('ename')}: {o.get('evalue')}" for i, cell in enumerate(_code_cells(nb))
            for o in cell.get("outputs", []) if o.get("output_type") == "error"]


def _warnings(nb: dict) -> list[str]:
    """stderr text of the cells (warnings a reader would see, with the machine's paths in them)."""
    return ["".join(o.get("text", "")) for cell in _code_cells(nb) for o in cell.get("outputs", [])
            if o.get("output_type") == "stream" and o.get("name") == "stderr"]


def _statements(code: str) -> list[str]:
    """Code lines without comments or blank lines, whitespace-normalized."""
    lines = (re.sub(r"\s+#.*$|^\s*#.*$", "", line).strip() for line in code.splitlines())
    return [re.sub(r"\s+", " ", line) for line in lines if line]


def test_the_committed_notebook_has_its_outputs_in_order_and_no_error():
    nb = json.loads(NOTEBOOK.read_text(encoding="utf-8"))
    cells = _code_cells(nb)
    assert 8 <= len(cells) <= 12  # a quickstart, not a tutorial
    assert [c["execution_count"] for c in cells] == list(range(1, len(cells) + 1))  # run top to bottom, once
    assert _errors(nb) == []
    assert [w for w in _warnings(nb) if "site-packages" in w or "Warning" in w] == []
    html = _html_outputs(nb)
    assert any("<article class=qcard" in h for h in html)  # attribute's card
    assert any("<h2>Questions</h2>" in h for h in html)  # run.report()
    assert any("validity against gold passages" in h for h in html)  # the run's panel
    code = "\n".join(_source(c) for c in cells)
    for needed in ("ragray.attribute(", 'ragray.run("demo", limit=2)', "from langchain_core",
                   "from llama_index.core", "run.report()"):
        assert needed in code, needed
    assert code.count("ragray.run_retriever(") == 2


def test_the_readme_python_block_is_what_the_notebook_runs():
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    blocks = re.findall(r"```python\n(.*?)```", readme, re.S)
    assert len(blocks) == 1
    nb = json.loads(NOTEBOOK.read_text(encoding="utf-8"))
    notebook = set(_statements("\n".join(_source(c) for c in _code_cells(nb))))
    missing = [s for s in _statements(blocks[0]) if s not in notebook]
    assert not missing, f"README lines the notebook does not run: {missing}"


@pytest.mark.slow
def test_the_notebook_runs_end_to_end(tmp_path, monkeypatch):
    nbformat = pytest.importorskip("nbformat", reason="pip install 'ragray[notebook]'")
    nbclient = pytest.importorskip("nbclient", reason="pip install 'ragray[notebook]'")
    pytest.importorskip("ipykernel", reason="pip install 'ragray[notebook]'")
    pytest.importorskip("langchain_core", reason="pip install 'ragray[notebook]'")
    pytest.importorskip("llama_index.core", reason="pip install 'ragray[notebook]'")
    # the kernel imports this checkout's ragray, whatever the environment has installed
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")])))
    work = tmp_path / "work"
    work.mkdir()

    nb = nbformat.read(NOTEBOOK, as_version=4)
    for cell in nb.cells:
        if cell.cell_type == "code":
            cell.outputs, cell.execution_count = [], None
    # "python3" is the kernel spec ipykernel brings (its argv `python` is this interpreter): no
    # `ipykernel install`, no network
    nb.cells.append(nbformat.v4.new_code_cell("import ragray\nprint(ragray.__file__)"))
    client = nbclient.NotebookClient(nb, kernel_name="python3", timeout=600,
                                     resources={"metadata": {"path": str(work)}})
    client.execute()

    executed = json.loads(nbformat.writes(nb))
    assert _errors(executed) == []
    assert [w for w in _warnings(executed) if "site-packages" in w or "Warning" in w] == []
    html = _html_outputs(executed)
    assert any("<article class=qcard" in h for h in html)
    assert any("<h2>Questions</h2>" in h for h in html)
    assert os.listdir(work) == []  # the notebook writes nothing where it runs
    printed = "".join("".join(o.get("text", "")) for o in executed["cells"][-1]["outputs"])  # text: lines
    assert Path(printed.strip()).resolve().is_relative_to(REPO)  # this checkout's ragray ran
