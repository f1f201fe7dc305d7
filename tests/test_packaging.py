"""The distribution installs two import names, `qs` and `qsrank`: pyproject.toml maps every
package folder, and no code imports the folders by their repository names."""

import ast
from pathlib import Path

import pytest

tomllib = pytest.importorskip("tomllib")  # Python >= 3.11

ROOT = Path(__file__).resolve().parents[1]
#: repository folder -> import name
FOLDERS = {
    "qs": "qs",
    "cli": "qsrank",
    "pipelines": "qsrank.pipelines",
    "configs": "qsrank.configs",
}


def _setuptools():
    return tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]


def _package_folders():
    """Import name of every folder holding an __init__.py, by the mapping above."""
    names = set()
    for folder, name in FOLDERS.items():
        for init in (ROOT / folder).rglob("__init__.py"):
            rel = init.parent.relative_to(ROOT / folder).parts
            names.add(".".join((name, *rel)))
    return names


def test_every_package_folder_is_in_the_distribution():
    setuptools = _setuptools()
    assert set(setuptools["packages"]) == _package_folders()
    assert setuptools["package-dir"] == {
        name: folder for folder, name in FOLDERS.items() if folder != name
    }


def _imports(path):
    tree = ast.parse(path.read_text(), filename=str(path))
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            yield node.module


@pytest.mark.parametrize("folder", ["qs", "cli", "pipelines", "tests"])
def test_no_code_imports_the_repository_folder_names(folder):
    bad = [
        f"{path.relative_to(ROOT)}: {name}"
        for path in sorted((ROOT / folder).rglob("*.py"))
        for name in _imports(path)
        if name.split(".")[0] in ("cli", "pipelines")
    ]
    assert not bad, "import qsrank / qsrank.pipelines instead:\n" + "\n".join(bad)
