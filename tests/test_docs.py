"""The README and the docs site cannot drift from the code: every Python example in them runs,
every `qsrank` and `make` command they show exists with the options they give. The site's
build is checked in test_docs_site.py."""

import re
import shlex
import shutil
from pathlib import Path

import click
import pytest

from qsrank.main import main

ROOT = Path(__file__).resolve().parents[1]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
FENCE = re.compile(r"^```(\w*)[^\n]*\n(.*?)^```", re.M | re.S)


def blocks(page, language):
    """The fenced code blocks of `page` in `language`, in order."""
    text = page.read_text(encoding="utf-8")
    return [body for lang, body in FENCE.findall(text) if lang == language]


def shell_commands(page):
    """The command lines of the page's bash blocks, comments and continuations resolved."""
    lines = []
    for body in blocks(page, "bash"):
        text = body.replace("\\\n", " ")
        lines += [line.split(" #")[0].strip() for line in text.splitlines()]
    return [shlex.split(line) for line in lines if line and not line.startswith("#")]


def make_targets():
    text = (ROOT / "Makefile").read_text(encoding="utf-8")
    return set(re.findall(r"^([a-zA-Z0-9_-]+):", text, re.M))


def pages_with(language):
    """The pages that hold a `language` block, as pytest parameters named by their path."""
    return [pytest.param(p, id=str(p.relative_to(ROOT))) for p in PAGES if blocks(p, language)]


@pytest.mark.parametrize("page", pages_with("python"))
def test_python_examples_run(page, tmp_path, monkeypatch):
    code = blocks(page, "python")
    for module in ("torch", "lightgbm", "xgboost"):  # the optional extras
        if any(f"import {module}" in c for c in code):
            pytest.importorskip(module)
    monkeypatch.chdir(tmp_path)  # an example that writes files writes them here
    namespace = {"__name__": "__docs__"}
    for i, body in enumerate(code):
        try:
            exec(compile(body, f"{page.name} example {i + 1}", "exec"), namespace)
        except Exception as err:  # name the example that broke, not this test's line
            pytest.fail(f"{page.name} example {i + 1} raised {type(err).__name__}: {err}")


def _parse(args):
    """Parse a `qsrank` command line as the CLI would, without running it. A path that does
    not exist here (the docs name the user's files) or a missing argument is accepted; an
    unknown command or option, or a value outside an option's choices, is not."""
    command, rest, ctx = main, list(args), click.Context(main, info_name="qsrank")
    while isinstance(command, click.Group) and rest and not rest[0].startswith("-"):
        name, command, rest = command.resolve_command(ctx, rest)
        if isinstance(command, click.Group) and not (rest and rest[0].startswith("-")):
            ctx = click.Context(command, info_name=name, parent=ctx)
            continue
        try:  # a command, or a group given its own options (`qsrank bench --vary ...`)
            command.make_context(name, rest, parent=ctx)
        except click.MissingParameter:
            pass
        except click.BadParameter as err:
            if "does not exist" not in err.format_message():
                raise
    return command


@pytest.mark.parametrize("page", pages_with("bash"))
def test_shell_commands_exist(page):
    commands = shell_commands(page)
    targets = make_targets()
    for argv in commands:
        if argv[0] == "make":
            missing = [t for t in argv[1:] if "=" not in t and t not in targets]
            assert not missing, f"{page.name}: no Makefile target {missing} in {shlex.join(argv)}"
        elif argv[0] == "qsrank":
            try:
                _parse(argv[1:])
            except click.UsageError as err:
                pytest.fail(f"{page.name}: {shlex.join(argv)}: {err.format_message()}")


def test_readme_headline_table_is_read_from_the_result_files():
    from qsrank.pipelines.headline import headline_table, with_table

    text = (ROOT / "README.md").read_text(encoding="utf-8")
    table = headline_table(ROOT / "results")
    assert with_table(text, table) == text, "README's headline table is stale: run `make readme`"


def test_headline_table_follows_the_result_files(tmp_path):
    from qsrank.pipelines.headline import headline_table

    results = tmp_path / "results"
    shutil.copytree(ROOT / "results", results)
    before = headline_table(results)
    ratios = results / "voc2011_actions" / "default" / "ratios.csv"
    lines = ratios.read_text(encoding="utf-8").splitlines()
    cells = lines[1].split(",")
    assert lines[0].startswith("ratio,total_time,replay_median,replay_min,replay_max,")
    cells[2:5] = ["99.0", "98.5", "99.5"]  # the AP row's replayed ratio: median, min, max
    ratios.write_text("\n".join([lines[0], ",".join(cells), *lines[2:]]) + "\n", encoding="utf-8")
    after = headline_table(results)
    assert "99.0x (98.5-99.5, median of 7 replays)" in after and "99.0x" not in before
    (results / "digits" / "default" / "table.csv").unlink()
    with pytest.raises(ValueError, match="table.csv is missing"):
        headline_table(results)
