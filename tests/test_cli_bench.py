"""`qsrank bench` (cli/bench.py): the scaling benchmark without a command, every other
benchmark as a command, and the registry's list of benchmarks in step with them."""

import importlib
import json

import pytest
from click.testing import CliRunner

from qsrank import bench
from qsrank.main import main
from qsrank.pipelines import _registry


def test_every_benchmark_runs_as_a_bench_command_and_none_is_an_experiment():
    assert not set(_registry.BENCHMARKS) & set(_registry.EXPERIMENTS)
    commands = set()
    for name, command in _registry.BENCHMARKS.items():
        words = command.split()
        assert words[:2] == ["qsrank", "bench"], command
        if len(words) > 2 and not words[2].startswith("--"):
            commands.add(words[2])
        assert not hasattr(importlib.import_module(f"qsrank.pipelines.{name}"), "main"), name
    assert commands == set(bench.bench.commands)


def test_bench_options_before_a_command_are_refused():
    result = CliRunner().invoke(main, ["bench", "--repeats", "2", "--vary", "total", "cold-start"])
    assert result.exit_code == 2
    assert (
        "--vary, --repeats: options of `qsrank bench` without a command; give those of "
        "cold-start after its name." in result.output
    )


def test_torch_lai_passes_its_parts(monkeypatch):
    pytest.importorskip("torch")
    from qsrank.pipelines import torch_lai_bench

    calls = []
    monkeypatch.setattr(torch_lai_bench, "run", lambda **kw: calls.append(kw) or "(a) text")
    runner = CliRunner()
    result = runner.invoke(main, ["bench", "torch-lai", "d", "a", "--repeats", "3"])
    assert result.exit_code == 0, result.output
    assert calls == [{"threads": 1, "repeats": 3, "parts": "da"}] and "(a) text" in result.output
    assert runner.invoke(main, ["bench", "torch-lai"]).exit_code == 0
    assert calls[-1]["parts"] == "abcd"
    assert runner.invoke(main, ["bench", "torch-lai", "e"]).exit_code == 2


def test_voc2007_scale_passes_the_pipelines_defaults_and_writes_json(monkeypatch, tmp_path):
    from qsrank.pipelines import voc2007_scale

    assert {k: voc2007_scale.DEFAULTS[k] for k in bench.SCALE_DEFAULTS} == bench.SCALE_DEFAULTS
    calls = []
    monkeypatch.setattr(voc2007_scale, "run", lambda **kw: calls.append(kw) or {"figures": 1})
    monkeypatch.setattr(voc2007_scale, "report", lambda results: "scale report")
    out = tmp_path / "scale.json"
    result = CliRunner().invoke(
        main, ["bench", "voc2007-scale", "--images", "24", "--pooled", "500", "--out", str(out)]
    )
    assert result.exit_code == 0, result.output
    assert calls == [
        {**bench.SCALE_DEFAULTS, "images": 24, "pooled": (500,), "store": None, "scheduler": None}
    ]
    assert json.loads(out.read_text()) == {"figures": 1} and "scale report" in result.output


def test_voc2007_scale_bad_size_is_one_line():
    result = CliRunner().invoke(main, ["bench", "voc2007-scale", "--images", "3"])
    assert result.exit_code == 1
    assert result.output.startswith("Error: images must lie in [20, 5011]")


def test_the_makefile_runs_benchmarks_through_qsrank_bench():
    from pathlib import Path

    makefile = (Path(__file__).resolve().parents[1] / "Makefile").read_text()
    assert "-m pipelines" not in makefile
    for command in _registry.BENCHMARKS.values():
        assert command.replace("qsrank", "$(QSRANK)", 1) in makefile, command


def test_ltr_passes_its_preset_and_knows_the_pipelines_presets(monkeypatch, tmp_path):
    from qsrank.pipelines import ltr_bench

    assert tuple(ltr_bench.PRESETS) == bench.LTR_PRESETS
    calls = []
    monkeypatch.setattr(ltr_bench, "run", lambda **kw: calls.append(kw) or (tmp_path, "ltr"))
    result = CliRunner().invoke(main, ["bench", "ltr", "--preset", "tenth", "--repeats", "2"])
    assert result.exit_code == 0, result.output
    assert calls == [
        {
            "preset": "tenth",
            "repeats": 2,
            "train_repeats": 3,
            "partition_rows": 1 << 18,
            "store": None,
            "out": None,
        }
    ]
    assert CliRunner().invoke(main, ["bench", "ltr", "--preset", "huge"]).exit_code == 2


def test_ltr_store_holds_whole_queries_per_npy_partition(tmp_path):
    pytest.importorskip("zarr")
    import numpy as np

    from qs.ssvm.out_of_core import npy_partitions
    from qsrank.pipelines import ltr_bench

    documents = ltr_bench.write_store(tmp_path, 7, partition_rows=300, n_features=30)
    parts = ltr_bench._partitions(tmp_path)
    X, y, groups = ltr_bench._open(tmp_path)
    assert len(parts) == 3 and X.shape == (documents, 30) and y.shape == groups.shape
    ends = np.cumsum([np.load(part, mmap_mode="r").shape[0] for part in parts])
    assert ends[-1] == documents and np.all(groups[ends[:-1] - 1] != groups[ends[:-1]])
    np.testing.assert_array_equal(npy_partitions(parts).compute(), X)
    first, *_ = ltr_bench._open(tmp_path, rows=int(ends[0]) + 1)
    np.testing.assert_array_equal(first, X[: ends[0] + 1])
