"""CIFAR-10: the batch loaders (both versions, each corruption), digits-as-CIFAR, the PL-CNN,
and a tiny run of the pipeline through run() and the CLI, resumed."""

import pickle

import numpy as np
import pytest

from qs.data.cifar10 import (
    CLASS_NAMES,
    DIGITS_NOTE,
    digits_as_cifar,
    load_cifar10,
    read_binary_batch,
    read_python_batch,
)

N_PER_BATCH = 6


def _batch(seed, n=N_PER_BATCH):
    rng = np.random.default_rng(seed)
    return rng.integers(0, 256, (n, 3072), dtype=np.uint8), rng.integers(0, 10, n)


def write_python(folder, n=N_PER_BATCH):
    """A tiny python-version CIFAR-10 folder; returns {batch name: (pixels, labels)}."""
    folder.mkdir(parents=True, exist_ok=True)
    batches = {}
    for k, name in enumerate([f"data_batch_{i}" for i in range(1, 6)] + ["test_batch"]):
        pixels, labels = batches[name] = _batch(k, n)
        record = {b"batch_label": name.encode(), b"data": pixels,
                  b"labels": [int(v) for v in labels], b"filenames": [b"x.png"] * n}
        (folder / name).write_bytes(pickle.dumps(record, protocol=2))
    meta = {b"label_names": [c.encode() for c in CLASS_NAMES], b"num_vis": 3072}
    (folder / "batches.meta").write_bytes(pickle.dumps(meta))
    return batches


def write_binary(folder, n=N_PER_BATCH):
    """A tiny binary-version CIFAR-10 folder; returns {batch name: (pixels, labels)}."""
    folder.mkdir(parents=True, exist_ok=True)
    batches = {}
    for k, name in enumerate([f"data_batch_{i}" for i in range(1, 6)] + ["test_batch"]):
        pixels, labels = batches[name] = _batch(k, n)
        records = np.concatenate([labels.astype(np.uint8)[:, None], pixels], axis=1)
        (folder / f"{name}.bin").write_bytes(records.tobytes())
    (folder / "batches.meta.txt").write_text("\n".join(CLASS_NAMES) + "\n\n")
    return batches


@pytest.mark.parametrize("write", [write_python, write_binary])
def test_both_versions_load_the_same_images(tmp_path, write):
    batches = write(tmp_path / "cifar")
    data = load_cifar10(tmp_path / "cifar")
    pixels = np.concatenate([batches[f"data_batch_{i}"][0] for i in range(1, 6)])
    assert data.X_train.shape == (5 * N_PER_BATCH, 3, 32, 32)
    assert data.X_train.dtype == np.uint8 and data.y_train.dtype == np.int64
    np.testing.assert_array_equal(data.X_train.reshape(-1, 3072), pixels)
    # channel-major: the first 1024 bytes are the red plane, row by row
    np.testing.assert_array_equal(data.X_test[0, 0, 0], batches["test_batch"][0][0, :32])
    np.testing.assert_array_equal(data.X_test[0, 1, 0], batches["test_batch"][0][0, 1024:1056])
    np.testing.assert_array_equal(data.y_test, batches["test_batch"][1])
    assert data.class_names == CLASS_NAMES
    assert "CIFAR-10" in data.source


@pytest.fixture(params=[write_python, write_binary])
def folder(request, tmp_path):
    request.param(tmp_path)
    return tmp_path


def test_parent_folder_of_the_batches_is_found(tmp_path):
    write_binary(tmp_path / "cifar-10-batches-bin")
    assert load_cifar10(tmp_path).X_test.shape == (N_PER_BATCH, 3, 32, 32)


def test_missing_directory_and_missing_batches(folder):
    with pytest.raises(ValueError, match="does not exist"):
        load_cifar10(folder / "nowhere")
    with pytest.raises(ValueError, match="no CIFAR-10 batches found"):
        load_cifar10(folder.parent)
    for path in folder.glob("data_batch_3*"):
        path.unlink()
    with pytest.raises(ValueError, match=r"missing CIFAR-10 batch\(es\) data_batch_3"):
        load_cifar10(folder)


def test_truncated_binary_batch(tmp_path):
    write_binary(tmp_path)
    path = tmp_path / "data_batch_2.bin"
    path.write_bytes(path.read_bytes()[:-100])
    with pytest.raises(ValueError, match=r"data_batch_2\.bin: .* not a whole number of 3073"):
        load_cifar10(tmp_path)
    path.write_bytes(b"")
    with pytest.raises(ValueError, match="data_batch_2.bin"):
        read_binary_batch(path)


def test_binary_label_out_of_range(tmp_path):
    write_binary(tmp_path)
    path = tmp_path / "test_batch.bin"
    raw = bytearray(path.read_bytes())
    raw[3073] = 10  # the second record's label byte
    path.write_bytes(bytes(raw))
    with pytest.raises(ValueError, match=r"test_batch\.bin: labels must be in 0..9; got 10 "
                                         r"at record 1"):
        load_cifar10(tmp_path)


def _rewrite(path, changes):
    record = pickle.loads(path.read_bytes())
    record.update(changes)
    path.write_bytes(pickle.dumps(record))


def test_python_batch_corruptions(tmp_path):
    batches = write_python(tmp_path)
    path = tmp_path / "data_batch_1"
    pixels, labels = batches["data_batch_1"]
    _rewrite(path, {b"data": pixels[:, :3000]})
    with pytest.raises(ValueError, match=r"data_batch_1: expected data of shape \(n, 3072\)"):
        load_cifar10(tmp_path)
    _rewrite(path, {b"data": pixels, b"labels": [int(v) for v in labels[:-1]]})
    with pytest.raises(ValueError, match="data_batch_1: expected data of shape"):
        read_python_batch(path)
    _rewrite(path, {b"labels": [-1] + [int(v) for v in labels[1:]]})
    with pytest.raises(ValueError, match="data_batch_1: labels must be in 0..9; got -1"):
        read_python_batch(path)
    _rewrite(path, {b"labels": [int(v) for v in labels], b"data": pixels.astype(np.float32)})
    with pytest.raises(ValueError, match="data_batch_1: data must be uint8"):
        read_python_batch(path)
    path.write_bytes(pickle.dumps({b"data": pixels})[:40])
    with pytest.raises(ValueError, match="data_batch_1: not a readable CIFAR-10 python batch"):
        read_python_batch(path)
    path.write_bytes(pickle.dumps([1, 2]))
    with pytest.raises(ValueError, match="expected a pickled dict"):
        read_python_batch(path)


class _Evil:
    def __reduce__(self):
        return (print, ("unpickled a function",))


def test_python_batch_builds_no_foreign_object(tmp_path, capsys):
    path = tmp_path / "test_batch"
    path.write_bytes(pickle.dumps({b"data": _Evil(), b"labels": [0]}))
    with pytest.raises(ValueError, match="global builtins.print is not allowed"):
        read_python_batch(path)
    assert "unpickled" not in capsys.readouterr().out


def test_bad_meta_names(tmp_path):
    write_binary(tmp_path)
    (tmp_path / "batches.meta.txt").write_text("a\nb\n")
    with pytest.raises(ValueError, match="batches.meta.txt: expected 10 class names"):
        load_cifar10(tmp_path)


def test_digits_as_cifar_is_deterministic_and_labelled():
    a, b = digits_as_cifar(400, seed=0), digits_as_cifar(400, seed=0)
    assert a.X_train.shape == (1397, 3, 32, 32) and a.X_test.shape == (400, 3, 32, 32)
    np.testing.assert_array_equal(a.X_train, b.X_train)
    np.testing.assert_array_equal(a.X_train[:, 0], a.X_train[:, 2])  # grey in 3 channels
    np.testing.assert_array_equal(a.X_train[:, :, ::4, ::4].repeat(4, 2).repeat(4, 3), a.X_train)
    assert set(np.unique(a.y_test)) == set(range(10))
    assert a.source.startswith(DIGITS_NOTE) and "not CIFAR-10" in a.source
    assert a.X_train.max() == 255
