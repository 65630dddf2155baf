"""The notebooks in examples/ run from top to bottom in a fresh kernel of this interpreter.

The kernel is described by a kernelspec written to a temporary directory,
pointing at ``sys.executable``, so the test does not depend on any kernel
installed on the machine (a fresh CI virtual environment has none of its own).
"""
from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

nbformat = pytest.importorskip("nbformat")
nbclient = pytest.importorskip("nbclient")
pytest.importorskip("ipykernel")

from ipykernel.kernelspec import write_kernel_spec  # noqa: E402
from jupyter_client.kernelspec import KernelSpecManager  # noqa: E402
from jupyter_client.manager import KernelManager  # noqa: E402
from nbclient.exceptions import CellExecutionError  # noqa: E402

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
NOTEBOOKS = sorted(EXAMPLES.glob("*.ipynb"))
KERNEL_NAME = "gplvm-explorer-tests"


@pytest.fixture(scope="module")
def kernel_dir(tmp_path_factory):
    """A directory holding one kernelspec that starts ``sys.executable -m ipykernel_launcher``."""
    root = tmp_path_factory.mktemp("kernels")
    spec = write_kernel_spec(root / KERNEL_NAME)
    assert json.loads(Path(spec, "kernel.json").read_text())["argv"][0] == sys.executable
    return root


def run(nb, kernel_dir: Path, cwd: Path):
    """Execute ``nb`` in place in a new kernel; raises CellExecutionError at the first failing cell."""
    km = KernelManager(kernel_name=KERNEL_NAME, kernel_spec_manager=KernelSpecManager(kernel_dirs=[str(kernel_dir)]))
    client = nbclient.NotebookClient(nb, km=km, timeout=600, allow_errors=False,
                                     resources={"metadata": {"path": str(cwd)}})
    try:
        client.execute()
    finally:  # a client given its kernel manager leaves the kernel running
        if km.has_kernel:
            km.shutdown_kernel(now=True)
    return nb


def test_there_are_notebooks_and_they_are_stored_without_outputs():
    assert len(NOTEBOOKS) >= 2, f"expected at least two notebooks in {EXAMPLES}"
    for path in NOTEBOOKS:
        nb = nbformat.read(path, as_version=4)
        nbformat.validate(nb)
        code = [c for c in nb.cells if c.cell_type == "code"]
        assert code, f"{path.name} has no code"
        for cell in code:
            assert not cell.outputs and cell.execution_count is None, f"{path.name} is stored with outputs"


@pytest.mark.slow
@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_notebook_runs_top_to_bottom(path, kernel_dir):
    nb = run(nbformat.read(path, as_version=4), kernel_dir, EXAMPLES)
    code = [c for c in nb.cells if c.cell_type == "code"]
    assert all(c.execution_count is not None for c in code), "not every cell ran"
    errors = [o for c in code for o in c.outputs if o.output_type == "error"]
    assert not errors
    shown = [o for c in code for o in c.outputs if o.output_type in ("display_data", "execute_result")]
    assert any("text/html" in o.get("data", {}) for o in shown), "no plot or page was displayed"


@pytest.mark.slow
def test_a_failing_cell_fails_the_run(tmp_path, kernel_dir):
    from nbformat.v4 import new_code_cell, new_notebook

    nb = new_notebook(cells=[new_code_cell("import engine"), new_code_cell("raise ValueError('broken example')"),
                             new_code_cell("print('never reached')")])
    with pytest.raises(CellExecutionError, match="broken example"):
        run(nb, kernel_dir, tmp_path)
    assert nb.cells[0].execution_count is not None  # the kernel is this interpreter: the engine imports
    assert nb.cells[2].execution_count is None
