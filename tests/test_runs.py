"""What every experiment shares (pipelines/_runs.py, _provenance.py): the code version that keys
a stored run, run directories claimed for one experiment and kind, and provenance."""

import json
import os
import stat
import subprocess
from functools import partial
from importlib import metadata

import pytest

from qsrank.pipelines import _runner, _runs
from qsrank.pipelines import voc2011_actions as voc
from qsrank.pipelines._io import write_json
from qsrank.pipelines._provenance import PACKAGES, code_version
from qsrank.pipelines._runs import MARKER, RunStore, claim_run_dir
from qsrank.pipelines.voc2011_actions import train as voc_train

run = partial(_runner.run, voc.SPEC)
resolve = partial(_runner.resolve, voc.SPEC)
figure_run = partial(_runner.run, voc.FIGURES)

TINY = {"max_boxes": 250, "classes": ["phoning"], "methods": ["ap_qs"]}


def git(repo, *args):
    subprocess.run(
        ["git", "-c", "user.name=t", "-c", "user.email=t@t", *args],
        cwd=repo,
        check=True,
        capture_output=True,
    )


def test_code_version_names_local_edits(tmp_path):
    git(tmp_path, "init", "-q")
    (tmp_path / "a.py").write_text("x = 1\n")
    git(tmp_path, "add", "a.py")
    git(tmp_path, "commit", "-q", "-m", "one")
    head = code_version(tmp_path)
    assert len(head) == 40 and "dirty" not in head
    (tmp_path / "a.py").write_text("x = 2\n")
    edited = code_version(tmp_path)
    assert edited.startswith(f"{head}-dirty-")
    (tmp_path / "a.py").write_text("x = 3\n")
    assert code_version(tmp_path) not in (head, edited)  # another edit, another version
    (tmp_path / "a.py").write_text("x = 1\n")
    assert code_version(tmp_path) == head
    (tmp_path / "new.py").write_text("y = 1\n")  # an untracked source file counts too
    assert code_version(tmp_path).startswith(f"{head}-dirty-")
    # no checkout (an installed wheel): the package's version, never an enclosing repository's
    assert code_version(tmp_path / "nowhere") == f"qsrank-{metadata.version('qsrank')}"
    (tmp_path / "site-packages" / "qsrank").mkdir(parents=True)
    assert code_version(tmp_path / "site-packages" / "qsrank").startswith("qsrank-")


def test_code_version_ignores_results_and_docs(tmp_path):
    (tmp_path / "results" / "x" / "default").mkdir(parents=True)
    table = tmp_path / "results" / "x" / "default" / "table.csv"
    table.write_text("a\n1\n")
    (tmp_path / "a.py").write_text("x = 1\n")
    (tmp_path / "README.md").write_text("# r\n")
    git(tmp_path, "init", "-q")
    git(tmp_path, "add", ".")
    git(tmp_path, "commit", "-q", "-m", "one")
    head = code_version(tmp_path)
    table.write_text("a\n2\n")  # a run rewrote its published table
    (tmp_path / "results" / "x" / "default" / "config.yaml").write_text("seed: 1\n")
    (tmp_path / "README.md").write_text("# r2\n")
    assert code_version(tmp_path) == head
    (tmp_path / "a.py").write_text("x = 2\n")
    assert code_version(tmp_path).startswith(f"{head}-dirty-")


def test_local_code_edits_retrain(tmp_path, monkeypatch):
    trained = []
    real = voc.train_one
    monkeypatch.setattr(
        voc_train,
        "train_one",
        lambda cfg, name, *a, **k: trained.append(name) or real(cfg, name, *a, **k),
    )
    monkeypatch.setattr(_runs, "code_version", lambda: "abc-dirty-0001")
    run(resolve(TINY), tmp_path / "run", progress=False)
    run(resolve(TINY), tmp_path / "run", progress=False)
    assert trained == ["ap_qs"]  # the same edits: resumed
    monkeypatch.setattr(_runs, "code_version", lambda: "abc-dirty-0002")
    run(resolve(TINY), tmp_path / "run", progress=False)
    assert trained == ["ap_qs", "ap_qs"]  # other edits of the same commit: retrained
    record = json.loads((tmp_path / "run" / "runs" / "phoning__ap_qs.json").read_text())
    assert record["settings"]["code"] == "abc-dirty-0002"


def test_out_of_another_experiment_or_kind_is_refused_before_training(tmp_path, monkeypatch):
    trained = []
    monkeypatch.setattr(voc_train, "train_one", lambda *a, **k: trained.append(a) or 1 / 0)
    bench = tmp_path / "bench"
    claim_run_dir(bench, "scaling", "bench")
    (bench / "config.yaml").write_text("seed: 0\n")
    before = {p.name: p.read_bytes() for p in bench.iterdir()}
    with pytest.raises(
        ValueError, match="holds a scaling bench run, not a voc2011_actions tables run"
    ):
        run(resolve(TINY), bench, progress=False)
    figure = claim_run_dir(tmp_path / "figure", "voc2011_actions", "figure")
    with pytest.raises(ValueError, match="holds a voc2011_actions figure run"):
        run(resolve(TINY), figure, progress=False)
    stranger = tmp_path / "stranger"
    stranger.mkdir()
    (stranger / "notes.txt").write_text("mine")
    with pytest.raises(ValueError, match="not empty and holds no qsrank run"):
        run(resolve(TINY), stranger, progress=False)
    blocker = tmp_path / "afile"
    blocker.write_text("x")
    with pytest.raises(ValueError, match="cannot write to output directory"):
        run(resolve(TINY), blocker / "run", progress=False)
    assert trained == []
    assert {p.name: p.read_bytes() for p in bench.iterdir()} == before


def test_store_keeps_records_of_the_current_settings_only(tmp_path):
    store = RunStore(tmp_path, {"C": 1.0})
    store.put("a", {"x": 1})
    assert store.get("a") == {"x": 1, "settings": {"C": 1.0}} and store.done("a")
    assert not RunStore(tmp_path, {"C": 2.0}).done("a")
    (tmp_path / "runs" / "b.json").write_text("{truncated")
    assert store.get("b") is None and store.records() == [store.get("a")]


def test_provenance_names_backends_data_checksum_and_each_command(tmp_path):
    cfg = resolve({**TINY, "methods": ["0-1"]})
    for vary in ("negatives", "positives"):
        figure_run(
            resolve(
                {
                    **cfg,
                    "figures": {
                        "preset": "quick",
                        "repeats": 1,
                        "loss": "ap",
                        "vary": vary,
                        "methods": ["0-1"],
                    },
                }
            ),
            tmp_path / "fig",
            progress=False,
        )
    record = json.loads((tmp_path / "fig" / "provenance.json").read_text())
    assert {"qpsolvers", "daqp", "llvmlite", "h5py"} <= set(PACKAGES)
    assert record["packages"]["qpsolvers"] and record["packages"]["daqp"]
    assert record["packages"]["llvmlite"] and record["packages"]["h5py"]
    assert len(record["data_sha256"]) == 2 and all(len(h) == 64 for h in record["data_sha256"])
    assert [c["settings"]["vary"] for c in record["commands"]] == ["negatives", "positives"]
    assert all(c["settings"]["preset"] == "quick" for c in record["commands"])


def test_a_run_killed_while_writing_its_marker_is_accepted_and_cleaned(tmp_path):
    """A kill inside `write_json` leaves only its temporary file: the directory is still a new
    one, and the temporary files of a killed run are removed when it is claimed again. Only
    names qsrank's atomic writer makes (`_io.TEMPORARY`) are taken for its own: a user's
    ``.notes.abcdefgh.tmp``, in the run or in a directory of its own, is kept."""
    out = tmp_path / "run"
    out.mkdir()
    (out / f".{MARKER}.k3x_9a2b.qsrank-tmp").write_text('{"experiment": "dig')
    assert claim_run_dir(out, "digits", "tables") == out
    assert sorted(p.name for p in out.iterdir()) == sorted([MARKER, _runs.LOCK])
    (out / "runs").mkdir()
    stale = [out / ".table.md.abcdefgh.qsrank-tmp", out / "runs" / ".a.json.0123abcd.qsrank-tmp"]
    for path in stale:
        path.write_text("half")
    users = [
        out / "runs" / "notes.tmp",
        out / "runs" / ".x.abcdefgh.tmp",
        out / ".table.md.abcdefgh.tmp",
    ]
    for path in users:
        path.write_text("not ours")
    assert claim_run_dir(out, "digits", "tables") == out
    assert not any(p.exists() for p in stale) and all(p.exists() for p in users)
    for name in (".draft.tmp", ".notes.abcdefgh.tmp"):
        foreign = tmp_path / f"foreign{name}"
        foreign.mkdir()
        (foreign / name).write_text("not ours")
        with pytest.raises(ValueError, match="not empty and holds no qsrank run"):
            claim_run_dir(foreign, "digits", "tables")
        assert [p.name for p in foreign.iterdir()] == [name]  # nothing added, nothing lost


@pytest.mark.parametrize("kind", ["text", "symlink", "fifo"])
def test_a_users_file_named_like_the_lock_is_neither_overwritten_nor_removed(tmp_path, kind):
    out, precious = tmp_path / "run", tmp_path / "precious.txt"
    out.mkdir()
    precious.write_text("a user's file\n")
    lock = out / _runs.LOCK
    if kind == "text":
        lock.write_text("a user's file\n")
    elif kind == "symlink":
        lock.symlink_to(precious)
    else:
        os.mkfifo(lock)
    with pytest.raises(ValueError, match="holds no qsrank run|not a lock file"):
        claim_run_dir(out, "digits", "tables")
    write_json(out / MARKER, {"experiment": "digits", "kind": "tables"})  # a run: still refused
    with pytest.raises(ValueError, match=r"\.qsrank-run\.lock .*not a lock file"):
        claim_run_dir(out, "digits", "tables")
    _runs.release_run_dirs()
    assert precious.read_text() == "a user's file\n"
    if kind == "text":
        assert lock.read_text() == "a user's file\n"
    else:
        assert lock.is_symlink() if kind == "symlink" else stat.S_ISFIFO(os.lstat(lock).st_mode)


def test_the_lock_file_of_a_killed_run_is_taken_over(tmp_path):
    out = tmp_path / "run"
    out.mkdir()
    (out / _runs.LOCK).write_text(
        json.dumps(
            {"pid": 1, "host": "h", "command": "qsrank fit", "since": "2026-01-01 00:00:00 UTC"}
        )
    )
    assert claim_run_dir(out, "digits", "tables") == out
    assert json.loads((out / _runs.LOCK).read_text())["pid"] == os.getpid()
    _runs.release_run_dirs()
    assert not (out / _runs.LOCK).exists()


def test_a_run_directory_made_again_is_locked_again(tmp_path):
    import shutil

    out = claim_run_dir(tmp_path / "run", "digits", "tables")
    shutil.rmtree(out)
    assert claim_run_dir(out, "digits", "tables") == out
    assert _runs._HELD[out.resolve()].held()


def test_provenance_records_the_code_a_run_began_with(tmp_path, monkeypatch):
    """Commits made while a long run goes on are not its code: the version read as it began
    is the one recorded, complete or interrupted."""
    from qsrank.pipelines import _provenance

    versions = iter(["begun", "begun again"])
    monkeypatch.setattr(_runner, "code_version", lambda: next(versions))
    monkeypatch.setattr(_provenance, "code_version", lambda: "later")
    with _runner.run_dir("voc2011_actions", "tables", tmp_path / "a", {"seed": 0}, "data", {}):
        pass
    record = json.loads((tmp_path / "a" / "provenance.json").read_text())
    assert record["git_commit"] == "begun" and record["commands"][-1]["git_commit"] == "begun"
    with (
        pytest.raises(KeyboardInterrupt),
        _runner.run_dir("voc2011_actions", "tables", tmp_path / "b", {"seed": 0}, "data", {}),
    ):
        raise KeyboardInterrupt
    record = json.loads((tmp_path / "b" / "provenance.json").read_text())
    assert record["git_commit"] == "begun again" and "interrupted" in record["status"]
