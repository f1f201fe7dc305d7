"""qs.data.voc2007: the seeded synthetic data shaped like VOC2007 detection, image by image
(each from its own generator) and as a lazy Dask array cast bit for bit."""

import numpy as np
import pytest

from qs.data.voc2007 import SyntheticVOC2007
from qs.metrics import box_iou

SMALL = {"scale": 0.01, "boxes_per_image": 12, "n_features": 16}  # 50 trainval images


def test_each_image_comes_from_its_own_generator():
    gen = SyntheticVOC2007(5, **SMALL)
    whole = gen.split_data("trainval")
    X, boxes, (obj, _, _) = gen.image("trainval", 17)
    np.testing.assert_array_equal(X, whole.X[17 * 12 : 18 * 12])
    np.testing.assert_array_equal(boxes, whole.boxes[17 * 12 : 18 * 12])
    np.testing.assert_array_equal(obj, whole.objects[17][0])
    other = SyntheticVOC2007(5, scale=0.02, boxes_per_image=12, n_features=16)
    np.testing.assert_array_equal(other.image("trainval", 17)[0], X)  # scale adds images only
    assert not np.array_equal(gen.image("test", 17)[0], X)
    assert not np.array_equal(SyntheticVOC2007(6, **SMALL).image("trainval", 17)[0], X)
    with pytest.raises(ValueError, match="outside the 50 images"):
        gen.image("trainval", 50)
    with pytest.raises(ValueError, match="split must be one of trainval, test"):
        gen.image("val", 0)


def test_synthetic_features_as_a_lazy_dask_array():
    gen = SyntheticVOC2007(2, **SMALL)
    calls = []
    original = gen._feature_block
    object.__setattr__(gen, "_feature_block", lambda *a: calls.append(1) or original(*a))
    lazy = gen.features("trainval", dtype="float16", chunk_images=8)
    assert lazy.shape == (50, 12, 16) and lazy.dtype == np.float16
    assert lazy.chunks[0] == (8,) * 6 + (2,) and not calls  # nothing generated yet
    block = lazy[16:24].compute()
    assert len(calls) == 1
    whole = gen.split_data("trainval").X.reshape(50, 12, 16)
    np.testing.assert_array_equal(block, whole[16:24].astype(np.float16))
    np.testing.assert_array_equal(lazy.compute(), whole.astype(np.float16))


@pytest.mark.parametrize("dtype", ["float16", "float32", "float64"])
@pytest.mark.parametrize(
    "signal, noise, components", [(4.0, 1.0, 0), (3e5, 1e-5, 0), (0.5, 3e-3, 0), (4.0, 0.05, 3)]
)
def test_lazy_features_are_the_images_cast_bit_for_bit(dtype, signal, noise, components):
    # the compiled float16 conversion against NumPy's cast, through overflow to inf (signal
    # 3e5), subnormals (noise 1e-5) and the rounding of ordinary values
    gen = SyntheticVOC2007(4, **SMALL, signal=signal, noise=noise, components=components)
    with np.errstate(over="ignore"):
        whole = gen.split_data("test").X.reshape(-1, 12, 16).astype(dtype)
    lazy = gen.features("test", dtype=dtype, chunk_images=16).compute()
    bits = f"u{np.dtype(dtype).itemsize}"
    np.testing.assert_array_equal(lazy.view(bits), whole.view(bits))
    if dtype == "float16" and signal > 1e5:
        assert np.isinf(lazy).any()
    if dtype == "float16" and noise < 1e-4:
        assert (np.abs(lazy[np.isfinite(lazy)]) < np.finfo(np.float16).tiny).any()


def test_cnn_like_features_share_their_image_and_objects():
    """With components, the boxes of an image that meet no object are its background plus
    small noise (alike within the image, not across images), and a box on one object is the
    background plus its overlap times the object's appearance; without, every box is noise."""
    noise, spread = 0.01, 2 * np.sqrt(3) * 0.01  # the uniform noise's range, and rounding
    gen = SyntheticVOC2007(1, **SMALL, noise=noise, components=4)
    backgrounds = []
    for i in range(6):
        X, cand, (obj, _, _) = gen.image("trainval", i)
        overlap = np.stack([box_iou(o, cand) for o in obj], axis=1)
        alone = (overlap == 0).all(axis=1)
        assert alone.sum() >= 2
        background = X[alone].astype(np.float64)
        assert np.ptp(background, axis=0).max() <= spread + 1e-5
        backgrounds.append(background.mean(axis=0))
        single = np.flatnonzero((overlap > 0).sum(axis=1) == 1)
        on = overlap[single].argmax(axis=1)
        for o in np.unique(on):
            boxes = single[on == o]
            shape = (X[boxes] - backgrounds[-1]) / overlap[boxes, o][:, None]
            assert np.abs(shape - shape.mean(axis=0)).max() <= spread / overlap[boxes, o].min()
    assert (
        min(np.abs(a - b).max() for a in backgrounds for b in backgrounds if a is not b)
        > 10 * spread
    )
    X, cand, (obj, _, _) = SyntheticVOC2007(1, **SMALL, noise=noise).image("trainval", 0)
    alone = (np.stack([box_iou(o, cand) for o in obj], axis=1) == 0).all(axis=1)
    assert np.abs(X[alone]).max() <= spread  # no background without components


def test_paper_scale_settings_are_accepted_without_generating():
    gen = SyntheticVOC2007(0, scale=1.0, boxes_per_image=2000, n_features=4096)
    assert gen.n_images("trainval") == 5011 and gen.n_images("test") == 4952
    lazy = gen.features("test", dtype="float16")
    assert lazy.shape == (4952, 2000, 4096) and lazy.nbytes == 4952 * 2000 * 4096 * 2
