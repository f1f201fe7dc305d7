"""The scaling benchmark (pipelines/scaling/): `qsrank bench` and `qsrank plot` driven
through click's CliRunner on tiny sizes, its rotation of inputs and its share grid."""

import json

import pandas as pd
import pytest
import yaml
from click.testing import CliRunner

from qsrank.common import default_config
from qsrank.main import main
from qsrank.pipelines import scaling
from qsrank.pipelines.scaling import config, share, timing

OUTPUTS = (
    "timings.csv",
    "compile.csv",
    "summary.md",
    "config.yaml",
    "provenance.json",
    "scaling.png",
    "scaling.pdf",
)
ALL_CURVES = [
    ("01", "0-1"),
    ("ap", "ap"),
    ("ap", "ap_qs"),
    ("ap", "ap_search"),
    ("ap", "ap_auto"),
    ("ap", "ap_auto_out"),
    ("ap", "sort_dc"),
    ("ndcg", "ndcg"),
    ("ndcg", "ndcg_qs"),
    ("ndcg", "ndcg_auto"),
    ("ndcg", "ndcg_auto_out"),
    ("ndcg", "sort_dc"),
    ("-", "np.max"),
    ("-", "np.partition"),
    ("-", "np.sort"),
]


def invoke(*args):
    return CliRunner().invoke(main, [str(a) for a in args])


def read(path):
    return pd.read_csv(path, keep_default_na=False, na_values=[""])


@pytest.fixture(scope="module")
def quick_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("bench") / "run"
    result = invoke(
        "bench", "--vary", "negatives", "--preset", "quick", "--repeats", 2, "--out", out
    )
    assert result.exit_code == 0, result.output
    return out, result.output


def test_bench_writes_every_output_and_prints_table(quick_run):
    out, output = quick_run
    for name in OUTPUTS:
        assert (out / name).stat().st_size > 0, name
    assert not list(out.glob(".*")), "temporary files left behind"
    assert str(out) in output
    assert "ap loss: median seconds per call" in output and "| ndcg_qs" in output


def test_bench_csv_has_one_row_per_size_curve_repeat(quick_run):
    out, _ = quick_run
    spec = scaling.PRESETS["quick"]["negatives"]
    timings = read(out / "timings.csv")
    assert list(timings.columns) == [
        "vary",
        "loss",
        "curve",
        "method",
        "n_pos",
        "n_neg",
        "repeat",
        "seconds",
    ]
    assert len(timings) == spec["points"] * len(ALL_CURVES) * 2
    assert set(zip(timings["loss"], timings["curve"])) == set(ALL_CURVES)
    repeats = timings.groupby(["loss", "curve", "n_neg"])["repeat"].apply(sorted)
    assert repeats.map(tuple).tolist() == [(0, 1)] * len(repeats)
    assert set(timings["n_pos"]) == {spec["fixed"]} and set(timings["vary"]) == {"negatives"}
    assert (timings["n_neg"].min(), timings["n_neg"].max()) == (spec["start"], spec["stop"])
    assert (timings["seconds"] > 0).all()
    cold = read(out / "compile.csv")
    assert len(cold) == spec["points"] * len(ALL_CURVES)
    assert set(cold["status"]) == {"ok"} and (cold["seconds"] > 0).all()


def test_bench_records_config_data_and_provenance(quick_run):
    out, _ = quick_run
    config = yaml.safe_load((out / "config.yaml").read_text())
    assert (config["preset"], config["repeats"], config["vary"]) == ("quick", 2, "negatives")
    summary = (out / "summary.md").read_text()
    assert "synthetic" in summary and "N(1, 1^2)" in summary and "seed 0" in summary
    assert "Time relative to the paper's baseline `ap`" in summary
    assert "Time relative to `0-1`" in summary and "Cold first call" in summary
    record = json.loads((out / "provenance.json").read_text())
    assert record["seed"] == 0 and record["packages"]["numba"]
    assert len(record["load_average"]) == 3 and min(record["load_average"]) >= 0


def test_plot_redraws_the_figure(quick_run):
    out, _ = quick_run
    for ext in ("png", "pdf"):
        (out / f"scaling.{ext}").unlink()
    result = invoke("plot", out)
    assert result.exit_code == 0, result.output
    assert (out / "scaling.png").read_bytes().startswith(b"\x89PNG")
    assert (out / "scaling.pdf").read_bytes().startswith(b"%PDF")


def test_budget_skips_larger_sizes_and_says_so(tmp_path):
    result = invoke(
        "bench",
        "--preset",
        "quick",
        "--loss",
        "ap",
        "--methods",
        "ap,ap_qs",
        "--repeats",
        1,
        "--budget",
        1e-12,
        "--out",
        tmp_path,
    )
    assert result.exit_code == 0, result.output
    assert config.SKIPPED in result.output
    timings, cold = read(tmp_path / "timings.csv"), read(tmp_path / "compile.csv")
    assert set(timings["curve"]) == {"ap", "ap_qs"} and timings["n_neg"].nunique() == 1
    assert (cold["status"] == config.SKIPPED).sum() == 2 * (cold["n_neg"].nunique() - 1)
    assert config.SKIPPED in (tmp_path / "summary.md").read_text()


def test_unknown_vary_is_a_usage_error():
    result = invoke("bench", "--vary", "sideways")
    assert result.exit_code == 2, result.output
    assert "sideways" in result.output and "negatives" in result.output


@pytest.mark.parametrize(
    "text, key", [("repeatz: 3\n", "repeatz"), ("scores: {pos_meen: 2.0}\n", "scores.pos_meen")]
)
def test_unknown_config_key_names_it_and_writes_nothing(tmp_path, text, key):
    config = tmp_path / "bad.yaml"
    config.write_text(text)
    out = tmp_path / "out"
    result = invoke("bench", "--config", config, "--preset", "quick", "--out", out)
    assert result.exit_code == 1, result.output
    assert repr(key) in result.output and "allowed keys" in result.output
    assert "Traceback" not in result.output
    assert not out.exists()


def test_missing_config_file_is_an_error(tmp_path):
    missing = tmp_path / "nope.yaml"
    result = invoke("bench", "--config", missing, "--out", tmp_path / "out")
    assert result.exit_code == 2, result.output
    assert "nope.yaml" in result.output and "does not exist" in result.output


def test_unknown_curve_name_is_an_error(tmp_path):
    result = invoke("bench", "--preset", "quick", "--methods", "ap_qs,ap_fast", "--out", tmp_path)
    assert result.exit_code == 1, result.output
    assert "'ap_fast'" in result.output and "ap_qs" in result.output


def test_library_value_error_becomes_a_message(tmp_path, monkeypatch):
    def refuse(*args, **kwargs):
        raise ValueError("scores contain NaN at index 3")

    monkeypatch.setattr(timing, "lai", refuse)
    result = invoke("bench", "--preset", "quick", "--methods", "ap_qs", "--out", tmp_path / "out")
    assert result.exit_code == 1
    assert "scores contain NaN at index 3" in result.output and "Traceback" not in result.output


def test_config_file_resolves_to_the_paper_settings():
    config = scaling.load_config(default_config("scaling"))
    assert config["preset"] == "paper" and config["vary"] == "negatives"
    assert scaling.sizes(config)[0] == (227, 2270)


def test_plot_names_what_is_missing(quick_run, tmp_path):
    result = invoke("plot", tmp_path)
    assert result.exit_code == 1, result.output
    assert result.output.startswith(f"Error: cannot redraw {tmp_path}: ")
    assert "qsrank-run.json missing" in result.output and "Traceback" not in result.output
    copy = tmp_path / "run"
    copy.mkdir()
    (copy / "qsrank-run.json").write_bytes((quick_run[0] / "qsrank-run.json").read_bytes())
    result = invoke("plot", copy)
    assert result.exit_code == 1, result.output
    assert f"{copy / 'timings.csv'} is missing" in result.output
    assert not list(copy.glob("scaling.*"))


def test_each_call_reads_the_next_of_a_rotation_of_fresh_inputs(monkeypatch):
    cfg = scaling.load_config(None, preset="quick")
    rotation, labels = timing.make_data(cfg, 10, 90)
    assert len(rotation) == config.MAX_INPUTS  # 100 samples: the cap binds before 64 MB
    assert len({v.tobytes() for v in rotation[:50]}) == 50
    monkeypatch.setattr(config, "ROTATION_BYTES", 8 * 100 * 3)
    rotation, labels = timing.make_data(cfg, 10, 90)
    assert len(rotation) == 3
    seen = []
    monkeypatch.setattr(timing, "lai", lambda scores, *args, **kwargs: seen.append(scores))
    call = timing.caller(("ap", "ap_auto", "auto"), rotation, labels, None)
    for _ in range(4):
        call()
    assert [id(v) for v in seen] == [id(v) for v in rotation + rotation[:1]]


def test_share_grid_writes_its_table_and_figure(tmp_path):
    """`--vary share`: every cell of the quick grid timed for every curve, the grid table
    (CSV, Markdown, stdout) with the default's ratios, and the figure."""
    out = tmp_path / "share"
    result = invoke("bench", "--vary", "share", "--preset", "quick", "--repeats", 2, "--out", out)
    assert result.exit_code == 0, result.output
    spec = scaling.PRESETS["quick"]["share"]
    cells = {(max(1, round(s * n)), n) for n in spec["negatives"] for s in spec["shares"]}
    timings = read(out / "timings.csv")
    assert set(zip(timings["n_pos"], timings["n_neg"])) == cells
    assert set(timings["curve"]) == {c[1] for c in config.SHARE_CURVES}
    assert (timings.groupby(["loss", "curve", "n_pos", "n_neg"]).size() == 2).all()
    grid = read(out / "grid.csv")
    assert list(grid.columns) == share.SHARE_COLUMNS
    assert len(grid) == 2 * len(cells) and set(grid["loss"]) == {"ap", "ndcg"}
    assert (grid["vs_zero_one"] > 0).all() and (grid["vs_fastest_other"] > 0).all()
    assert (grid["vs_argsort"] > 0).all()  # np.argsort of the same scores, in every cell
    assert set(grid["fastest_other"]) <= {c[1] for c in config.SHARE_CURVES} - {
        "0-1",
        "np.argsort",
        "ap_auto",
        "ndcg_auto",
        "ap_batch",
        "ndcg_batch",
    }
    table = share.share_markdown(grid)
    assert table in (out / "summary.md").read_text() and table in result.output
    for name in ("scaling.png", "scaling.pdf"):
        assert (out / name).stat().st_size > 0


def test_share_grid_rejects_a_bad_share(tmp_path):
    config = tmp_path / "c.yaml"
    config.write_text(
        yaml.safe_dump(
            {
                "vary": "share",
                "presets": {"quick": {"share": {"negatives": [100], "shares": [0.1, -1]}}},
            }
        )
    )
    result = invoke("bench", "--config", config, "--preset", "quick", "--out", tmp_path / "r")
    assert result.exit_code == 1 and "shares" in result.output
    assert not (tmp_path / "r").exists()


def test_share_cells_are_unique_where_shares_round_to_one_count():
    pairs = scaling.sizes(scaling.resolve({"vary": "share"}))
    spec = scaling.PRESETS["paper"]["share"]
    assert len(pairs) == len(set(pairs)) < len(spec["negatives"]) * len(spec["shares"])
    assert (1, 1000) in pairs and (5 * 10**6, 10**7) in pairs
