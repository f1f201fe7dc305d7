"""The replay benchmark (pipelines/voc2011_actions/replay.py, `qsrank bench --replay`): the
LAI calls of a training recorded and every exact method timed on them, on a tiny subsample."""

import pandas as pd
import yaml
from click.testing import CliRunner

from qsrank.main import main
from qsrank.pipelines.voc2011_actions import replay


def invoke(*args):
    return CliRunner().invoke(main, [str(a) for a in args])


def read(path):
    return pd.read_csv(path, keep_default_na=False, na_values=[""])


def test_replay_times_every_method_on_every_recorded_vector(tmp_path):
    config = tmp_path / "tiny.yaml"
    config.write_text(yaml.safe_dump({"experiment": "voc2011_actions", "max_boxes": 300}))
    out = tmp_path / "replay"
    result = invoke("bench", "--replay", "--config", config, "--class", "phoning", "--loss",
                    "ndcg", "--repeats", 2, "--out", out)
    assert result.exit_code == 0, result.output
    for name in ("timings.csv", "summary.md", "config.yaml", "provenance.json"):
        assert (out / name).is_file(), name
    timings = read(out / "timings.csv")
    methods = ["zero_one", *replay.METHODS["ndcg"]]
    n_calls = timings["call"].nunique()
    assert n_calls >= 2 and set(timings["loss"]) == {"ndcg"}
    assert len(timings) == 2 * n_calls * len(methods)
    assert sorted(timings["method"].unique()) == sorted(methods)
    assert (timings["seconds"] > 0).all()
    assert f"phoning, ndcg loss: {n_calls} LAI calls" in result.output
    assert all(f"| {m} " in result.output for m in methods)
