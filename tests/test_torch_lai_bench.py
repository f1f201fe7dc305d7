"""qsrank.pipelines.torch_lai_bench on tiny sizes: it runs and reports every figure."""

import pytest

torch = pytest.importorskip("torch")
from qsrank.pipelines import torch_lai_bench


def test_bench_reports_every_figure():
    text = torch_lai_bench.run(repeats=2, cnn_batch=2, large=(2, 3000))
    for line in (
        "10 x zero_one_lai kernel (0-1)",
        "lai_batch ap / 10 x 0-1 kernel",
        "10 x lai ndcg / lai_batch ndcg",
        "rank_hinge_loss 01 fwd+bwd",
        "% of the step",
        "ranks identical: True",
        "lai_batch ndcg method qs / default method",
    ):
        assert line in text
    if not torch.cuda.is_available():
        assert (
            "(d) 64 queries x 1000000 samples (1% positives), AP: skipped, torch sees no CUDA"
            in text
        )
