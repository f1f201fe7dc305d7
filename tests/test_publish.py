"""Runs go under runs/ (ignored by git), never into the committed results/; publishing a
finished run into results/ is a step of its own (pipelines/publish.py, `qsrank publish`)."""

import hashlib
import json
import re
import shutil
import subprocess
from functools import partial
from pathlib import Path

import pytest
from click.testing import CliRunner

from qsrank.main import main
from qsrank.pipelines import _runner
from qsrank.pipelines import voc2011_actions as voc
from qsrank.pipelines._runs import release_run_dirs
from qsrank.pipelines.publish import PUBLISHED, check_finished, publish

ROOT = Path(__file__).resolve().parents[1]
TINY = {"max_boxes": 250, "classes": ["phoning"], "methods": ["ap_qs"]}
run = partial(_runner.run, voc.SPEC)


def tree_digest(root):
    """SHA-256 over every file's path and bytes under `root`."""
    h = hashlib.sha256()
    for path in sorted(p for p in Path(root).rglob("*") if p.is_file()):
        h.update(str(path.relative_to(root)).encode() + b"\0" + path.read_bytes())
    return h.hexdigest()


@pytest.fixture(scope="module")
def finished(tmp_path_factory):
    out = run(
        _runner.resolve(voc.SPEC, TINY), tmp_path_factory.mktemp("r") / "default", progress=False
    )
    release_run_dirs()
    return out


def test_a_run_without_out_goes_under_runs_and_leaves_results_alone(tmp_path, monkeypatch):
    before = tree_digest(ROOT / "results")
    monkeypatch.chdir(tmp_path)
    sets = [a for k, v in TINY.items() for a in ("--set", f"{k}={json.dumps(v)}")]
    res = CliRunner().invoke(main, ["train", "--config", "voc2011_actions", *sets])
    assert res.exit_code == 0, res.output
    made = [p for p in (tmp_path / "runs" / "voc2011_actions").iterdir() if p.is_dir()]
    assert len(made) == 1 and (made[0] / "table1.md").is_file()
    assert not (tmp_path / "results").exists()
    assert tree_digest(ROOT / "results") == before


@pytest.mark.skipif(shutil.which("make") is None, reason="needs make")
def test_make_targets_write_under_runs(tmp_path):
    """Every target that runs something writes under RUNS; only publish and readme name
    results/ (read with `make -n`: nothing runs). sodeep-checkpoints writes the sorters that
    ship in the package, on purpose."""
    targets = re.findall(r"^([a-z0-9-]+):.*## ", (ROOT / "Makefile").read_text(), re.MULTILINE)
    runs = tmp_path / "elsewhere"
    for target in set(targets) - {
        "install",
        "clean",
        "publish",
        "readme",
        "test",
        "docs",
        "wheel-check",
        "help",
        "sodeep-checkpoints",
    }:
        dry = subprocess.run(
            ["make", "-n", "-C", str(ROOT), target, f"RUNS={runs}"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout
        for line in dry.splitlines():
            assert "results/" not in line, f"make {target}: {line}"
            for out in re.findall(r"--out (\S+)", line):
                assert out.startswith(str(runs)), f"make {target}: {line}"


def test_publish_copies_what_the_docs_and_readme_read(finished, tmp_path):
    to, names = publish(finished, tmp_path / "results" / "voc2011_actions" / "default")
    assert {
        "table1.md",
        "table1.csv",
        "ratios.csv",
        "provenance.json",
        "config.yaml",
        "qsrank-run.json",
    } <= set(names)
    for name in names:
        assert (to / name).read_bytes() == (finished / name).read_bytes()
    assert not (to / "runs").exists()  # the resumable state stays with the run
    assert all(Path(n).suffix in PUBLISHED for n in names)


def test_publish_defaults_to_results_of_the_experiment(finished, tmp_path):
    to, _ = publish(finished, results=tmp_path / "results")
    assert to == tmp_path / "results" / "voc2011_actions" / "default"


def test_publish_removes_what_the_run_no_longer_writes(finished, tmp_path):
    to = tmp_path / "published"
    to.mkdir()
    shutil.copy(finished / "qsrank-run.json", to)
    (to / "table9.md").write_text("old\n")
    (to / "notes.txt").write_text("not a result file\n")
    publish(finished, to)
    assert not (to / "table9.md").exists() and (to / "notes.txt").exists()


def test_publish_refuses_an_unfinished_run(finished, tmp_path):
    broken = tmp_path / "broken"
    shutil.copytree(finished, broken)
    prov = json.loads((broken / "provenance.json").read_text())
    prov["status"] = "interrupted: KeyboardInterrupt"
    (broken / "provenance.json").write_text(json.dumps(prov))
    with pytest.raises(ValueError, match="did not finish"):
        check_finished(broken)
    (broken / "provenance.json").unlink()
    with pytest.raises(ValueError, match="no provenance"):
        publish(broken, tmp_path / "to")
    assert not (tmp_path / "to").exists()
    with pytest.raises(ValueError, match="holds no qsrank run"):
        publish(tmp_path, tmp_path / "to")


def test_publish_refuses_another_experiments_directory(finished, tmp_path):
    other = tmp_path / "other"
    other.mkdir()
    (other / "qsrank-run.json").write_text('{"experiment": "digits", "kind": "tables"}')
    with pytest.raises(ValueError, match="holds a digits tables run"):
        publish(finished, other)


def test_publish_command(finished, tmp_path):
    res = CliRunner().invoke(main, ["publish", str(finished), "--to", str(tmp_path / "p")])
    assert res.exit_code == 0, res.output
    assert (tmp_path / "p" / "table1.md").is_file()
    res = CliRunner().invoke(main, ["publish", str(tmp_path / "nothing")])
    assert res.exit_code == 1 and "no run directory" in res.output
