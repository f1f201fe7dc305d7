"""The VOC2007 scale benchmark (qsrank.pipelines.voc2007_scale) at a tiny size: it scores the
Table 5 generator's own features (SyntheticVOC2007), lazily, and a store written from that generator
is read back from disk to the same best boxes; its report holds every figure."""

import os

import numpy as np
import pytest

from qs.data.convert import write_synthetic_store
from qs.data.voc2007 import SyntheticVOC2007
from qs.detection import score_bags
from qsrank.pipelines._measure import peak_bytes
from qsrank.pipelines.voc2007_scale import (
    DEFAULTS,
    _fresh_process_pass,
    generated_features,
    report,
    run,
)

TINY = {
    "boxes": 6,
    "features": 8,
    "chunk_images": 8,
    "repeats": 1,
    "pooled": (500,),
    "positives": 10,
}


def test_generated_features_are_the_synthetic_voc2007_images():
    cfg = {**DEFAULTS, "images": 24, "boxes": 5, "features": 3, "chunk_images": 10, "seed": 2}
    a = generated_features(cfg)
    assert a.shape == (24, 5, 3) and a.dtype == np.float16 and a.numblocks == (3, 1, 1)
    gen = SyntheticVOC2007(2, 1.0, boxes_per_image=5, n_features=3)
    expected = np.stack([gen.image("trainval", i)[0] for i in range(24)]).astype(np.float16)
    np.testing.assert_array_equal(a.compute(), expected)
    np.testing.assert_array_equal(a.blocks[1].compute(), expected[10:20])  # a chunk alone
    W = np.random.default_rng(0).normal(size=(3, 4))
    lazy, eager = score_bags(a, np.full(24, 5), W), score_bags(expected, np.full(24, 5), W)
    np.testing.assert_array_equal(lazy.best, eager.best)
    with pytest.raises(ValueError, match="images must lie in"):
        generated_features({**cfg, "images": 19})


def test_run_at_a_tiny_size_reports_every_figure():
    res = run(images=24, **TINY)
    a = res["scoring_pass"]
    assert a["blocks"] == 3 and a["classes"] == 20 and "store_pass" not in res
    for key in (
        "pass_s",
        "products_scaled_s",
        "score_scaled_s",
        "generate_scaled_s",
        "peak_gb",
        "lockstep_pass_s",
        "lockstep_peak_gb",
        "boxes_per_s",
    ):
        assert a[key] > 0
    assert a["peak_gb"] >= a["start_gb"]
    ((n, ap, zero_one),) = res["pooled_lai"]
    assert n == 500 and ap > 0 and zero_one > 0
    text = report(res)
    assert "peak memory" in text and "| 5e+02" in text and "store" not in text
    assert "lockstep pass (top 10 per class, one check per class)" in text
    assert "not the paper's data" in res["provenance"]["data"]
    with pytest.raises(ValueError, match="unknown settings"):
        run(image=3)


@pytest.mark.parametrize("seed", [0, 1])
def test_a_store_is_scored_from_disk_beside_the_generated_features(tmp_path, seed):
    path = write_synthetic_store(
        tmp_path / "store",
        seed=seed,
        scale=25 / 5011,
        boxes_per_image=6,
        n_features=8,
        dtype="float16",
        chunk_images=10,
    )
    res = run(store=str(path), images=500, **TINY)  # the store's shape replaces the sizes
    a, s = res["scoring_pass"], res["store_pass"]
    assert (a["images"], a["boxes"], a["features"], a["blocks"]) == (25, 6, 8, 3)
    assert s["disk_pass_s"] > 0 and s["read_mb_per_s"] > 0 and s["features_on_disk_gb"] > 0
    assert s["same_best"] is (seed == 0)  # the benchmark's generator uses seed 0
    text = report(res)
    assert (
        "read from the store" in text
        and f"boxes as the generated pass: {'yes' if seed == 0 else 'no'}" in text
    )


def test_a_missing_store_is_a_value_error(tmp_path):
    with pytest.raises(ValueError, match="No box store"):
        run(store=str(tmp_path / "none"), **TINY)


@pytest.mark.skipif(not os.path.exists("/proc/self/status"), reason="needs Linux's VmHWM")
def test_peak_memory_is_the_fresh_process_own():
    held = np.ones(40_000_000)  # 320 MB in this process, which forks the measured one
    _, peak, before, _ = _fresh_process_pass({**DEFAULTS, "images": 20, **TINY})
    assert 0 < before <= peak
    assert peak + held.nbytes // 2 < peak_bytes()  # none of this process's pages counted
