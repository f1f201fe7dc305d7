"""Readers and configs facing hostile or damaged files: a crash, a hang, an unbounded read, a
path out of the data directory or a huge value each become a one-line ValueError."""

import numpy as np
import pytest
import scipy.io

from qs.data import load_features, load_rcnn_cache


def _segfaulting_mat(path):
    """An uncompressed v5 .mat whose type tag (byte 177) crashes scipy's reader."""
    scipy.io.savemat(path, {"X": np.ones((10, 16), np.float32), "y": np.zeros(10)},
                     do_compression=False)
    raw = bytearray(path.read_bytes())
    raw[177] = 0x0F
    path.write_bytes(bytes(raw))
    return path


def test_a_mat_file_that_crashes_the_reader_is_a_one_line_error(tmp_path):
    path = _segfaulting_mat(tmp_path / "seg.mat")
    with pytest.raises(ValueError, match=r"seg\.mat: the reader process died .*corrupt"):
        load_features(path)
    good = tmp_path / "good.mat"
    scipy.io.savemat(good, {"X": np.eye(3), "y": np.arange(3.0)}, do_compression=False)
    X, y = load_features(good)  # the next read works as before
    np.testing.assert_array_equal(X, np.eye(3))
    np.testing.assert_array_equal(y, np.arange(3.0))


def test_an_rcnn_cache_that_crashes_the_reader_is_named(tmp_path):
    rng = np.random.default_rng(0)
    scipy.io.savemat(tmp_path / "000001.mat", {"boxes": np.array([[1.0, 1, 5, 5]]),
                                               "feat": rng.normal(size=(1, 3))})
    _segfaulting_mat(tmp_path / "000002.mat")
    with pytest.raises(ValueError, match=r"000002\.mat: the reader process died"):
        load_rcnn_cache(tmp_path)
