"""qsrank.pipelines.torch_loss_bench on tiny sizes: every part runs and is reported."""

import csv

import pytest

torch = pytest.importorskip("torch")
from qsrank.pipelines import torch_loss_bench


def test_every_part_runs_and_writes_its_files(tmp_path):
    out = tmp_path / "run"
    written, report = torch_loss_bench.run(
        out,
        sizes=(256, 512),
        q=2,
        repeats=1,
        batched_sizes=(2000,),
        per_rank=256,
        bank=(3000, 8, 16),
    )
    for heading in (
        "## Forward + backward per loss",
        "## The loss's inference against `lai`",
        "## Distributed (gloo, 2 processes, 256 samples each, 2 queries)",
        "## Memory bank (M = 3000, 8 queries, d = 16",
    ):
        assert heading in report
    assert written == out
    with open(out / "curves.csv") as fh:
        rows = list(csv.DictReader(fh))
    devices = 2 if torch.cuda.is_available() else 1
    assert len(rows) == devices * 2 * len(torch_loss_bench.LOSSES)
    assert all(float(r["median_s"]) > 0 for r in rows)
    smooth = [r for r in rows if r["loss"] == "Smooth-AP" and r["device"] == "cpu"]
    assert int(smooth[-1]["peak_bytes"]) >= 2 * 512 * 512 * 4  # its (Q, n, n) table
    for name in ("report.md", "curves.png", "curves.pdf", "provenance.json"):
        assert (out / name).is_file()


def test_smooth_ap_is_skipped_where_its_table_would_not_fit(monkeypatch):
    monkeypatch.setattr(torch_loss_bench, "SMOOTH_AP_MAX_BYTES", 1 << 20)
    rows = torch_loss_bench.loss_curves(
        torch, sizes=(256,), q=2, repeats=1, losses=("exact AP hinge", "Smooth-AP")
    )
    assert rows[0][3] > 0 and rows[1][3] is None and "needs about" in rows[1][7]


def test_unknown_parts_are_refused(tmp_path):
    from click.testing import CliRunner

    from qsrank.main import main

    result = CliRunner().invoke(
        main, ["bench", "torch-losses", "--out", str(tmp_path / "x"), "--parts", "curves,bogus"]
    )
    assert result.exit_code == 2 and "unknown parts ['bogus']" in result.output
    assert not (tmp_path / "x").exists()


@pytest.mark.parametrize(
    "args, expected",
    [
        (["bench", "torch-losses", "--repeats", "2"], {"repeats": 2}),
        (
            [
                "bench",
                "torch-losses",
                "--repeats",
                "2",
                "--sizes",
                "256,512",
                "--queries",
                "3",
                "--parts",
                "curves,memory",
            ],
            {"repeats": 2, "sizes": (256, 512), "q": 3, "parts": ("curves", "memory")},
        ),
    ],
)
def test_cli_runs_the_benchmark(monkeypatch, tmp_path, args, expected):
    from click.testing import CliRunner

    from qsrank.main import main

    calls = []

    def fake_run(out, **given):
        calls.append((out, given))
        return tmp_path, "# report"

    monkeypatch.setattr(torch_loss_bench, "run", fake_run)
    result = CliRunner().invoke(main, [*args, "--out", str(tmp_path)])
    assert result.exit_code == 0, result.output
    ((out, given),) = calls
    assert out == tmp_path and {k: given[k] for k in expected} == expected
    assert "# report" in result.output and f"results: {tmp_path}" in result.output


def test_cli_parts_are_the_benchmarks():
    from qsrank.bench import TORCH_LOSS_PARTS

    assert TORCH_LOSS_PARTS == torch_loss_bench.PARTS
