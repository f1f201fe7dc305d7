"""The replay benchmark (pipelines/voc2011_actions/replay.py, `qsrank bench --replay`): the
LAI calls of a training recorded and every exact method timed on them, on a tiny subsample."""

import pandas as pd
import pytest
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
    result = invoke(
        "bench",
        "--replay",
        "--config",
        config,
        "--class",
        "phoning",
        "--loss",
        "ndcg",
        "--repeats",
        2,
        "--out",
        out,
    )
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


def test_replay_times_each_round_of_the_recorded_calls():
    import numpy as np

    from qsrank.pipelines._replay import Recorder, ratio_spread, replay, round_means

    rng = np.random.default_rng(0)
    labels = np.arange(200) % 5 == 0
    recorder = Recorder()
    scores = rng.normal(size=200)
    recorder(scores, labels)
    recorder(np.zeros(200), labels)
    scores[:] = 0.0  # the recorder kept a copy
    assert recorder.calls[0][0].any() and recorder.calls[1][1] is recorder.calls[0][1]
    totals = replay(recorder.calls, "ap", "qs", 4)
    assert len(totals) == 4 and all(t > 0 for t in totals)
    assert replay(recorder.calls, "ap", "qs", 0) == []
    # per round: slow (2, 4), fast (1, 1.5) averaged over two trainings -> ratios 2, 8/3
    slow, fast = [[2.0, 4.0], [2.0, 4.0, 9.0]], [[1.0, 1.0], [1.0, 2.0]]
    assert ratio_spread(slow, fast) == pytest.approx((7 / 3, 2.0, 8 / 3))
    assert round_means(fast).tolist() == [1.0, 1.5]
    assert ratio_spread([[]], fast) is None


def test_replay_rounds_run_in_processes_of_their_own():
    import os

    from qsrank.pipelines._replay import round_process

    pids = [round_process(k).submit(os.getpid).result() for k in range(3)]
    assert len(set(pids)) == 3 and os.getpid() not in pids
    assert round_process(1).submit(os.getpid).result() == pids[1]  # kept for the next replay
