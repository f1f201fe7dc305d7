"""The VOC2007 scale benchmark (pipelines.voc2007_scale) at a tiny size: its generated features
are seeded per chunk and never depend on the chunking of the rest, its pass is the in-memory
scoring of the same array, and its report holds every figure."""

import numpy as np
import pytest

from pipelines.voc2007_scale import report, run, synthetic_features
from qs.detection import score_bags


def test_generated_features_are_seeded_finite_and_lazy():
    a = synthetic_features(10, 7, 5, seed=3, chunk_images=4)
    assert a.shape == (10, 7, 5) and a.dtype == np.float16 and a.numblocks == (3, 1, 1)
    values = a.compute()
    assert np.isfinite(values).all() and np.abs(values).max() < 2
    np.testing.assert_array_equal(values, synthetic_features(10, 7, 5, seed=3,
                                                             chunk_images=4).compute())
    assert not np.array_equal(values, synthetic_features(10, 7, 5, seed=4,
                                                         chunk_images=4).compute())
    np.testing.assert_array_equal(a.blocks[1].compute(), values[4:8])  # one chunk on its own
    assert synthetic_features(4, 2, 3, dtype="float32").dtype == np.float32
    W = np.random.default_rng(0).normal(size=(5, 3))
    counts = np.full(10, 7)
    lazy, eager = score_bags(a, counts, W), score_bags(values, counts, W)
    np.testing.assert_array_equal(lazy.best, eager.best)
    np.testing.assert_array_equal(lazy.score, eager.score)


def test_run_at_a_tiny_size_reports_every_figure():
    res = run(images=6, boxes=20, features=16, chunk_images=4, repeats=1, pooled=(500,),
              positives=10)
    a = res["scoring_pass"]
    assert a["blocks"] == 2 and a["classes"] == 20
    for key in ("pass_s", "products_scaled_s", "score_scaled_s", "generate_scaled_s",
                "peak_gb"):
        assert a[key] > 0
    assert a["peak_gb"] >= a["start_gb"]
    (n, ap, zero_one), = res["pooled_lai"]
    assert n == 500 and ap > 0 and zero_one > 0
    text = report(res)
    assert "peak memory" in text and "| 5e+02" in text
    assert "not the paper's data" in res["provenance"]["data"]
    with pytest.raises(ValueError, match="unknown settings"):
        run(image=3)
