"""`qsrank compare`: the pipeline on tiny budgets (resumed), its methods, and bad input
(the outside surrogates themselves: tests/test_surrogates_outside.py)."""

import importlib.util
from functools import partial

import pytest
from click.testing import CliRunner

torch = pytest.importorskip("torch")

from qsrank.main import main
from qsrank.pipelines import _runner, compare
from qsrank.pipelines.compare import classification, methods

run = partial(_runner.run, compare.SPEC)
resolve = partial(_runner.resolve, compare.SPEC)
report = partial(_runner.report, compare.SPEC)


# ---------------------------------------------------------------------------- the pipeline

TINY = {
    "seeds": [0, 1],
    "datasets": ["digits"],
    "digits": {"epochs": 2, "batch_size": 300},
    "methods": ["cross_entropy", "ap_hinge", "aucpr"],
}


def test_pipeline_tables_resume_and_force(tmp_path):
    out = run(resolve(TINY), tmp_path / "run", progress=False)
    text = report(out)
    assert "## digits" in text and "± " in text
    for method in TINY["methods"]:
        assert f"| {method} " in text
    results = compare.results_frame([]).columns
    import pandas as pd

    frame = pd.read_csv(out / "results.csv")
    assert list(frame.columns) == list(results)
    assert len(frame) == len(TINY["methods"]) * 2
    assert frame.test_ap.between(0, 1).all() and (frame.epoch == 2).all()
    # cross-entropy and the AP hinge both learn the digits: far above the positive rate
    assert frame[frame.method == "ap_hinge"].test_ap.min() > 0.5
    for name in (
        "figure.png",
        "figure.pdf",
        "tables.md",
        "summary.csv",
        "history.csv",
        "config.yaml",
        "provenance.json",
    ):
        assert (out / name).is_file()
    stamps = {p.name: p.stat().st_mtime_ns for p in (out / "runs").iterdir()}
    run(resolve(TINY), out, progress=False)  # resumes: nothing retrained
    assert {p.name: p.stat().st_mtime_ns for p in (out / "runs").iterdir()} == stamps
    run(resolve({**TINY, "methods": ["cross_entropy"], "force": True}), out, progress=False)
    changed = [n for n, t in stamps.items() if (out / "runs" / n).stat().st_mtime_ns != t]
    assert sorted(changed) == [
        "digits__cross_entropy__seed0.json",
        "digits__cross_entropy__seed1.json",
    ]


def _digits_task(cfg):
    return classification.Task(classification.load_data("digits"), cfg, "digits")


def test_seconds_budget_stops_after_the_first_epoch_past_it():
    cfg = resolve({**TINY, "digits": {"epochs": None, "seconds": 1e-9}})
    record = compare.train_one("cross_entropy", _digits_task(cfg), cfg, "digits", 0)
    assert record["epoch"] == 1


def test_sodeep_row_trains_through_the_shipped_sorter():
    cfg = resolve({**TINY, "methods": ["sodeep_ap"]})
    record = compare.train_one("sodeep_ap", _digits_task(cfg), cfg, "digits", 0)
    # the frozen sorter's AP surrogate learns the digits: far above the positive rate (~0.1)
    assert record["test_ap"] > 0.5


def test_same_seed_same_start_and_batches():
    cfg = resolve(TINY)
    a, b = (compare.train_one("ap_hinge", _digits_task(cfg), cfg, "digits", 0) for _ in range(2))
    assert a["test_ap"] == b["test_ap"]


def test_cli_compare_runs_and_train_finds_the_pipeline(tmp_path):
    import yaml

    config = tmp_path / "c.yaml"
    config.write_text(
        yaml.safe_dump(
            {"experiment": "compare", **TINY, "seeds": [0], "methods": ["cross_entropy"]}
        )
    )
    result = CliRunner().invoke(
        main, ["compare", "--config", str(config), "--out", str(tmp_path / "a")]
    )
    assert result.exit_code == 0, result.output
    assert "| cross_entropy" in result.output
    result = CliRunner().invoke(
        main, ["train", "--config", str(config), "--out", str(tmp_path / "b")]
    )
    assert result.exit_code == 0, result.output
    assert "| cross_entropy" in result.output
    for ext in ("png", "pdf"):
        (tmp_path / "a" / f"figure.{ext}").unlink()
    result = CliRunner().invoke(main, ["plot", str(tmp_path / "a")])
    assert result.exit_code == 0, result.output
    assert (tmp_path / "a" / "figure.png").read_bytes().startswith(b"\x89PNG")
    (tmp_path / "a" / "history.csv").unlink()
    result = CliRunner().invoke(main, ["plot", str(tmp_path / "a")])
    assert result.exit_code == 1 and "history.csv is missing" in result.output


# ---------------------------------------------------------------------------- bad input


@pytest.mark.parametrize(
    "config, match",
    [
        (
            {"methods": ["ap_hinge", "lambdaloss"]},
            r"^methods.1: expected one of cross_entropy, zero_one, ap_hinge, .*; got 'lambdaloss'$",
        ),
        (
            {"datasets": ["mnist"]},
            r"^datasets.0: expected one of voc2011_actions, .*; got 'mnist'$",
        ),
        (
            {"digits": {"epochs": 0}},
            r"^digits.epochs: expected a value >= 1; got 0$",
        ),
        (
            {"digits": {"epochs": None, "seconds": 0}},
            r"^digits.seconds: expected a value > 0; got 0$",
        ),
        ({"digits": {"epochs": None}}, "^digits: set a budget, epochs or seconds"),
        ({"epochs": 3}, r"^unknown config key 'epochs'"),
        (
            {"digits": {"epoch": 3}},
            r"^unknown config key 'digits.epoch'; allowed keys in 'digits': "
            r"epochs, seconds, batch_size, lr$",
        ),
        ({"options": {"anchors": 5}}, r"^unknown config key 'options.anchors'"),
        (
            {"cifar10": {"widths": [8, 16]}},
            r"^cifar10.widths: expected a list of 3 or more; got \[8, 16\]$",
        ),
    ],
)
def test_bad_config(config, match):
    with pytest.raises(ValueError, match=match):
        resolve(config)


def test_method_without_its_package_names_the_extra(monkeypatch, tmp_path):
    real = importlib.util.find_spec
    monkeypatch.setattr(
        methods.importlib.util,
        "find_spec",
        lambda name, *a: None if name == "libauc" else real(name, *a),
    )
    with pytest.raises(
        ImportError,
        match=r"method libauc_ap needs the package libauc, which "
        r"is not installed: pip install 'qsrank\[compare\]'",
    ):
        resolve({"methods": ["libauc_ap"]})
    config = tmp_path / "c.yaml"
    config.write_text("experiment: compare\nmethods: [libauc_ap]\n")
    result = CliRunner().invoke(
        main, ["compare", "--config", str(config), "--out", str(tmp_path / "o")]
    )
    assert result.exit_code == 1
    assert result.output.strip().splitlines() == [
        (
            "Error: method libauc_ap needs the package libauc, which is not installed: pip "
            "install 'qsrank[compare]'"
        )
    ]
    assert not (tmp_path / "o").exists()


def test_cli_bad_method_is_one_line(tmp_path):
    config = tmp_path / "c.yaml"
    config.write_text("experiment: compare\nmethods: [ap_hinge, nope]\n")
    result = CliRunner().invoke(main, ["compare", "--config", str(config)])
    assert result.exit_code == 1
    assert len(result.output.strip().splitlines()) == 1
    assert (
        "methods.1: expected one of cross_entropy, zero_one," in result.output
        and "; got 'nope'" in result.output
    )
