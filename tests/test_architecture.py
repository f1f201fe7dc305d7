"""docs/architecture.md is true of the code: its module inventory, the direction of imports,
and the modules of `qs` that write files or draw progress."""

import ast
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PAGE = (ROOT / "docs" / "architecture.md").read_text(encoding="utf-8")
FOLDERS = ("qs", "pipelines", "cli")
#: calls that write to the file system
WRITES = {
    "write_text",
    "write_bytes",
    "save",
    "savez",
    "savez_compressed",
    "tofile",
    "mkdir",
    "makedirs",
    "rename",
    "unlink",
    "rmtree",
    "TemporaryFile",
    "NamedTemporaryFile",
    "mkstemp",
    "mkdtemp",
    "to_zarr",
    "create_array",
    "create_group",
}
WRITES |= {"os.replace", "os.remove"}
#: calls that print or draw progress
SHOWS = {"print", "tqdm", "echo"}


def _modules(*folders):
    return sorted(
        p.relative_to(ROOT).as_posix() for folder in folders for p in (ROOT / folder).rglob("*.py")
    )


def _section(title):
    match = re.search(rf"^### {re.escape(title)}\n(.*?)(?=^#)", PAGE, re.S | re.M)
    assert match, f"docs/architecture.md has no section {title!r}"
    return set(re.findall(r"^- `([\w/]+\.py)`", match.group(1), re.M))


def _calls(path):
    """The names called in a module (the last part of a dotted call), and whether it opens a
    file for writing."""
    names = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if not isinstance(node, ast.Call):
            continue
        func = node.func
        name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", None)
        names.add(name)
        if isinstance(func, ast.Attribute) and getattr(func.value, "id", None) == "os":
            names.add(f"os.{name}")  # os.replace, os.remove: not str.replace
        modes = list(node.args[1:2]) + [k.value for k in node.keywords if k.arg == "mode"]
        if name in ("open", "open_group", "open_array") and any(
            isinstance(m, ast.Constant) and isinstance(m.value, str) and set(m.value) & set("wax+")
            for m in modes
        ):
            names.add("open for writing")
    return names


def _imports(path):
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            yield from (a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            yield node.module
        elif (
            isinstance(node, ast.Call)
            and getattr(node.func, "attr", None) == "import_module"
            and node.args
            and isinstance(node.args[0], ast.JoinedStr | ast.Constant)
        ):
            first = (
                node.args[0].values[0] if isinstance(node.args[0], ast.JoinedStr) else node.args[0]
            )
            if isinstance(first, ast.Constant):
                yield first.value


def test_every_module_is_in_the_inventory_and_every_listed_one_exists():
    listed = set(re.findall(r"^\| `((?:qs|pipelines|cli)/[\w/]+\.py)` \|", PAGE, re.M))
    modules = set(_modules(*FOLDERS))
    assert not modules - listed, f"not in docs/architecture.md: {sorted(modules - listed)}"
    assert not listed - modules, f"listed but gone: {sorted(listed - modules)}"


@pytest.mark.parametrize(
    "folder, banned",
    [
        ("qs", ("qsrank",)),
        (
            "pipelines",
            (
                "qsrank.main",
                "qsrank.common",
                "qsrank.bench",
                "qsrank.fit",
                "qsrank.load",
                "qsrank.sodeep",
                "qsrank.train",
            ),
        ),
    ],
)
def test_imports_point_one_way(folder, banned):
    bad = [
        f"{m}: {name}"
        for m in _modules(folder)
        for name in _imports(ROOT / m)
        if any(name == b or name.startswith(b + ".") for b in banned)
    ]
    assert not bad, bad


def test_the_qs_modules_that_write_files_are_the_ones_named():
    writing = {m for m in _modules("qs") if _calls(ROOT / m) & (WRITES | {"open for writing"})}
    assert writing == _section("What in qs writes files")


def test_the_qs_modules_that_draw_progress_are_the_ones_named():
    showing = {m for m in _modules("qs") if _calls(ROOT / m) & SHOWS}
    assert showing == _section("What in qs draws progress")


def _private_names_imported(path):
    """The private names a module imports from other modules of qs (a private module, as
    ``from qs.ssvm import _problem``, is not one)."""
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if not (isinstance(node, ast.ImportFrom) and node.module and node.level == 0):
            continue
        if node.module.split(".")[0] != "qs":
            continue
        package = ROOT.joinpath(*node.module.split("."))
        for alias in node.names:
            is_module = (package / f"{alias.name}.py").exists() or (package / alias.name).is_dir()
            if alias.name.startswith("_") and not is_module:
                yield f"from {node.module} import {alias.name}"


def test_no_private_name_is_imported_from_another_module():
    bad = [f"{m}: {line}" for m in _modules("qs") for line in _private_names_imported(ROOT / m)]
    assert not bad, f"make these public in the module that owns them: {bad}"


def test_the_private_import_check_tells_a_name_from_a_module(tmp_path):
    module = tmp_path / "m.py"
    module.write_text(
        "from qs.ssvm import _problem\nfrom qs.ssvm.latent import _Hidden, Bags\n"
        "from numpy import _core\n",
        encoding="utf-8",
    )
    assert list(_private_names_imported(module)) == ["from qs.ssvm.latent import _Hidden"]
