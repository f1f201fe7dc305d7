"""`qsrank train` (dispatch on the config's `experiment`) and `qsrank bench --experiment`,
driven through click's CliRunner on tiny subsamples of the synthetic VOC2011 action data."""

import json
from pathlib import Path

import pandas as pd
import pytest
import yaml
from click.testing import CliRunner

from qsrank.main import main
from qsrank.train import experiments

TINY = {
    "experiment": "voc2011_actions",
    "max_boxes": 250,
    "classes": ["phoning", "running"],
    "methods": ["0-1", "ap", "ap_qs"],
}


def invoke(*args):
    return CliRunner().invoke(main, [str(a) for a in args])


def write_config(path, **changes):
    path.write_text(yaml.safe_dump({**TINY, **changes}))
    return path


@pytest.fixture
def tiny_config(tmp_path):
    return write_config(tmp_path / "tiny.yaml")


def test_train_runs_the_experiment_and_prints_tables(tiny_config, tmp_path):
    out = tmp_path / "run"
    result = invoke("train", "--config", tiny_config, "--out", out)
    assert result.exit_code == 0, result.output
    assert f"results: {out}" in result.output
    assert "# Table 1" in result.output and "# Table 4" in result.output
    assert "ours (synthetic)" in result.output
    timings = pd.read_csv(out / "timings.csv")
    assert list(zip(timings["class"], timings["method"])) == [
        (c, m) for c in TINY["classes"] for m in TINY["methods"]
    ]
    for k in range(1, 5):
        assert (out / f"table{k}.md").is_file() and (out / f"table{k}.csv").is_file()
    # rerun: resumes, nothing retrained
    before = {p.name: p.stat().st_mtime_ns for p in (out / "runs").iterdir()}
    again = invoke("train", "--config", tiny_config, "--out", out)
    assert again.exit_code == 0, again.output
    assert {p.name: p.stat().st_mtime_ns for p in (out / "runs").iterdir()} == before


def test_train_filters_class_loss_inference(tiny_config, tmp_path):
    out = tmp_path / "run"
    result = invoke(
        "train",
        "--config",
        tiny_config,
        "--class",
        "phoning",
        "--loss",
        "ap",
        "--inference",
        "qs",
        "--out",
        out,
    )
    assert result.exit_code == 0, result.output
    assert sorted(p.name for p in (out / "runs").glob("*.json")) == ["phoning__ap_qs.json"]
    config = yaml.safe_load((out / "config.yaml").read_text())
    assert config["classes"] == ["phoning"] and config["inference"] == "qs"
    # --force retrains what is there; --solver changes the settings, so it retrains too
    path = out / "runs" / "phoning__ap_qs.json"
    mtime = path.stat().st_mtime_ns
    result = invoke(
        "train",
        "--config",
        tiny_config,
        "--class",
        "phoning",
        "--loss",
        "ap",
        "--inference",
        "qs",
        "--out",
        out,
        "--force",
    )
    assert result.exit_code == 0, result.output
    assert path.stat().st_mtime_ns != mtime
    result = invoke(
        "train",
        "--config",
        tiny_config,
        "--class",
        "phoning",
        "--loss",
        "ap",
        "--inference",
        "qs",
        "--solver",
        "frank_wolfe",
        "--out",
        out,
    )
    assert result.exit_code == 0, result.output
    assert json.loads(path.read_text())["solver"] == "frank_wolfe"


@pytest.mark.parametrize(
    "changes, args, message",
    [
        ({"colour": "red"}, [], "unknown config key 'colour'"),
        ({}, ["--class", "dancing"], "classes.0: expected one of jumping, phoning"),
        ({}, ["--loss", "ndcg"], "no method of ['0-1', 'ap', 'ap_qs'] has loss 'ndcg'"),
        ({}, ["--inference", "magic"], "inference: expected one of zero_one, yue"),
        ({"experiment": "nonesuch"}, [], "unknown experiment 'nonesuch'"),
        ({"experiment": None}, [], "has no top-level key `experiment`"),
        (
            {"data": {"trainval": "/nowhere/list.txt", "test": "/nowhere/list.txt"}},
            [],
            "Cannot read the poselet list file /nowhere/list.txt",
        ),
    ],
)
def test_train_errors_are_clear(tmp_path, changes, args, message):
    config = {**TINY, **changes}
    if config["experiment"] is None:
        del config["experiment"]
    path = tmp_path / "bad.yaml"
    path.write_text(yaml.safe_dump(config))
    result = invoke("train", "--config", path, "--out", tmp_path / "out", *args)
    assert result.exit_code == 1, result.output
    assert result.output.startswith("Error: ") and message in result.output, result.output
    assert "Traceback" not in result.output
    assert not (tmp_path / "out").exists()


def test_train_error_keeps_earlier_results(tiny_config, tmp_path):
    out = tmp_path / "run"
    assert (
        invoke(
            "train", "--config", tiny_config, "--class", "phoning", "--loss", "01", "--out", out
        ).exit_code
        == 0
    )
    before = {p: p.read_bytes() for p in out.rglob("*") if p.is_file()}
    bad = write_config(tmp_path / "bad.yaml", max_boxes=5)  # some class lacks a positive
    result = invoke("train", "--config", bad, "--out", out)
    assert result.exit_code == 1 and "has no positive box" in result.output, result.output
    assert {p: p.read_bytes() for p in out.rglob("*") if p.is_file()} == before


def test_experiments_lists_the_pipelines():
    assert "voc2011_actions" in experiments() and "_io" not in experiments()
    assert "scaling" not in experiments()  # a benchmark, not an experiment


def test_train_set_overrides_keys_and_records_them(tiny_config, tmp_path):
    out = tmp_path / "run"
    result = invoke(
        "train",
        "--config",
        tiny_config,
        "--set",
        "methods=[0-1]",
        "--set",
        "classes=[phoning]",
        "--set",
        "C.01=10",
        "--out",
        out,
    )
    assert result.exit_code == 0, result.output
    config = yaml.safe_load((out / "config.yaml").read_text())
    assert config["methods"] == ["0-1"] and config["classes"] == ["phoning"]
    assert config["C"]["01"] == 10 and config["max_boxes"] == TINY["max_boxes"]
    provenance = json.loads((out / "provenance.json").read_text())
    sets = ["methods=[0-1]", "classes=[phoning]", "C.01=10"]
    assert provenance["overrides"] == sets and provenance["commands"][-1]["overrides"] == sets


@pytest.mark.parametrize(
    "setting, message",
    [
        (
            "C.svc=1",
            "in --set: unknown config key 'C.svc'; allowed keys in 'C': ap_svm, "
            "zero_one_svm, linear_svc",
        ),
        ("cv.folds=" + "x" * 500, "in --set: cv.folds: expected an integer; got 'xxx"),
        ("seed", "--set 'seed': expected KEY=VALUE"),
    ],
)
def test_train_bad_set_is_one_line_and_writes_nothing(tmp_path, setting, message):
    config = Path(__file__).resolve().parents[1] / "configs" / "digits.yaml"
    result = invoke("train", "--config", config, "--set", setting, "--out", tmp_path / "out")
    assert result.exit_code == 1, result.output
    assert result.output.startswith("Error: ") and message in result.output, result.output
    assert result.output.count("\n") == 1 and len(result.output) < 300, result.output
    assert not (tmp_path / "out").exists()


def test_config_show_prints_the_defaults_with_help():
    from qsrank.pipelines import _runner, digits

    result = invoke("config", "show", "digits")
    assert result.exit_code == 0, result.output
    assert yaml.safe_load(result.output) == _runner.resolve(digits.SPEC, {})
    lines = result.output.splitlines()
    assert len(lines) == 20 and all("  # " in line for line in lines)
    assert "  ap_svm: cv  # C of the AP-SVM, or cv" in lines
    assert invoke("config", "show", "scaling").exit_code == 2  # a benchmark: not a choice


@pytest.mark.parametrize("name", experiments())
def test_config_show_gives_every_experiments_defaults(name):
    from qsrank.pipelines import _registry, _schema

    result = invoke("config", "show", name)
    assert result.exit_code == 0, result.output
    model = _registry.schema(name)
    assert yaml.safe_load(result.output) == model.model_construct().model_dump(by_alias=True)
    assert all("  # " in line for line in result.output.splitlines())
    assert _schema.keys(model)["experiment"].default == name


def test_bench_experiment_writes_the_figure(tiny_config, tmp_path):
    out = tmp_path / "fig"
    result = invoke(
        "bench",
        "--experiment",
        "voc2011_actions",
        "--config",
        tiny_config,
        "--class",
        "phoning",
        "--vary",
        "negatives",
        "--loss",
        "ndcg",
        "--preset",
        "quick",
        "--repeats",
        1,
        "--out",
        out,
    )
    assert result.exit_code == 0, result.output
    assert "Figure 3 (ndcg), varying the negatives" in result.output
    assert f"results: {out}" in result.output
    timings = pd.read_csv(out / "timings.csv")
    assert set(timings["method"]) == {"0-1", "ndcg", "ndcg_qs"}
    assert set(timings["class"]) == {"phoning"} and set(timings["vary"]) == {"negatives"}
    assert (out / "figure.png").stat().st_size > 0 and (out / "figure.pdf").stat().st_size > 0


@pytest.mark.parametrize(
    "args, message",
    [
        (["--experiment", "voc2011_actions", "--budget", 1], "--budget applies to the synthetic"),
        (["--class", "phoning"], "--class needs --experiment"),
        (
            ["--experiment", "voc2011_actions", "--class", "dancing", "--preset", "quick"],
            "figures.class: expected one of jumping, phoning",
        ),
        (
            ["--experiment", "voc2011_actions", "--methods", "ap_fast"],
            "figures.methods.0: expected one of 0-1, ap, ap_qs",
        ),
    ],
)
def test_bench_experiment_errors(tmp_path, args, message):
    result = invoke("bench", *args, "--out", tmp_path / "out")
    assert result.exit_code != 0 and message in result.output, result.output
    assert "Traceback" not in result.output and not (tmp_path / "out").exists()


def test_train_unwritable_out_is_a_clear_error(tiny_config, tmp_path):
    # --out under a regular file: an OSError from the pipeline, reported without a traceback
    blocker = tmp_path / "afile"
    blocker.write_text("not a directory")
    result = invoke(
        "train",
        "--config",
        tiny_config,
        "--class",
        "phoning",
        "--loss",
        "01",
        "--out",
        blocker / "run",
    )
    assert result.exit_code == 1, result.output
    assert "Error:" in result.output and "Traceback" not in result.output
    assert not isinstance(result.exception, OSError)


@pytest.mark.parametrize("name", ["digits", "voc2011_actions", "voc2007_paper"])
def test_a_default_config_is_given_by_name(name, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # found as package data, not relative to the working folder
    result = invoke("config", "check", name)
    assert result.exit_code == 0, result.output
    shipped = yaml.safe_load((Path(__file__).parents[1] / "configs" / f"{name}.yaml").read_text())
    assert yaml.safe_load(result.output)["experiment"] == shipped["experiment"]


def test_an_unknown_config_name_lists_the_defaults(tmp_path):
    result = invoke("train", "--config", "digitz", "--out", tmp_path / "out")
    assert result.exit_code == 2
    assert "digitz does not exist" in result.output and "digits" in result.output
    assert not (tmp_path / "out").exists()


def test_config_check_reports_a_bad_key_in_one_line(tmp_path):
    result = invoke("config", "check", write_config(tmp_path / "bad.yaml", nonsense=1))
    assert result.exit_code == 1 and "nonsense" in result.output
    assert "Traceback" not in result.output
