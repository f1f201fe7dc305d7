"""The command line's shell: help and version without loading the pipelines, and the
one-line notice before numba compiles."""

import atexit
import os
import re
import subprocess
import sys
from pathlib import Path

import numba
import pytest
from click.testing import CliRunner

from qsrank import bench, common, train
from qsrank.main import main

COMMANDS = [
    [],
    ["bench"],
    ["bench", "torch-lai"],
    ["bench", "torch-losses"],
    ["bench", "voc2007-scale"],
    ["bench", "cold-start"],
    ["train"],
    ["compare"],
    ["config"],
    ["config", "show"],
    ["plot"],
    ["load"],
    ["load", "poselet"],
    ["load", "cnn"],
    ["load", "verify"],
    ["sodeep"],
    ["sodeep", "train"],
    ["sodeep", "eval"],
]


@pytest.mark.parametrize("command", COMMANDS, ids=" ".join)
def test_every_command_has_help(command):
    result = CliRunner().invoke(main, [*command, "--help"])
    assert result.exit_code == 0, result.output
    assert result.output.startswith("Usage: ")


def test_version_is_printed():
    result = CliRunner().invoke(main, ["--version"])
    assert result.exit_code == 0, result.output
    assert result.output.startswith("qsrank, version ")
    assert result.output.split()[-1][0].isdigit()


def test_help_imports_no_pipeline_nor_numba():
    # the registry of experiments is a list of names: the one pipelines module help reads
    code = (
        "import sys\nfrom click.testing import CliRunner\nfrom qsrank.main import main\n"
        "assert CliRunner().invoke(main, ['bench', '--help']).exit_code == 0\n"
        "assert CliRunner().invoke(main, ['train', '--help']).exit_code == 0\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] in "
        "('numba', 'qs', 'scipy', 'pandas', 'matplotlib', 'pydantic') or "
        "m.startswith('qsrank.pipelines.') and m != 'qsrank.pipelines._registry'))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_option_choices_match_their_sources():
    from qs.ssvm import SOLVERS
    from qsrank.pipelines import scaling

    assert bench.VARIES == scaling.VARIES
    assert bench.BENCH_LOSSES == scaling.LOSSES
    assert bench.CURVE_NAMES == scaling.CURVE_NAMES
    assert tuple(sorted(SOLVERS)) == train.SOLVER_NAMES
    assert set(bench.BENCH_EXPERIMENTS) <= set(train.experiments())


def test_compile_notice_once_before_a_compile_not_on_a_cache_load(capsys, monkeypatch):
    monkeypatch.setitem(common._notice, "shown", False)
    common.notice_compiles()
    common.notice_compiles()  # registering twice still prints once

    @numba.njit
    def add_one(x):
        return x + 1

    add_one(1)
    add_one(1.5)
    assert capsys.readouterr().err == "compiling kernels (first run only) ...\n"
    assert common._notice["depth"] == 0 and common._notice["seconds"] > 0
    atexit.unregister(common._report_compiles)  # not at the end of the test run


def test_compile_time_reported_at_exit(tmp_path):
    """A process that compiles prints, as it exits, how long it compiled."""
    script = tmp_path / "compiles.py"
    script.write_text(
        "import numba\nfrom cli import common as m\nm.notice_compiles()\n"
        "numba.njit(lambda x: x + 1)(1)\n"
    )
    env = {**os.environ, "PYTHONPATH": str(Path(common.__file__).resolve().parents[1])}
    run = subprocess.run(
        [sys.executable, str(script)], capture_output=True, text=True, env=env, check=True
    )
    assert re.search(r"compiled kernels for \d+\.\d s", run.stderr)


@pytest.mark.parametrize("given", [None, "12"])
def test_openblas_workers_told_to_sleep_before_numpy_loads(given):
    code = (
        "import os, sys\nimport qsrank\nloaded = 'numpy' in sys.modules\n"
        "print(os.environ['OPENBLAS_THREAD_TIMEOUT'], loaded)"
    )
    env = {k: v for k, v in os.environ.items() if k != "OPENBLAS_THREAD_TIMEOUT"}
    if given:
        env["OPENBLAS_THREAD_TIMEOUT"] = given  # a user's own setting wins
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == [given or "4", "False"]
