"""The box-feature store (qs/data/store.py, store_writer.py), the conversion into it
(qs/data/convert.py, sources.py, reading.py), `qsrank load cnn` and `qsrank load verify`:
layout, identity with the in-memory data, checksums verified as chunks are read, resuming
after an interrupt, kills inside the writer's crash windows, a reader that crashes its
process, and bad input."""

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import scipy.io
from click.testing import CliRunner

import qsrank.load as cli_load
from qs.data import convert, open_store, sources
from qs.data.boxes import load_rcnn_cache
from qs.data.latent_list import load_latent_list
from qs.data.reading import ReaderCrash
from qs.data.store import FORMAT_VERSION, StoreDamaged
from qs.data.store_writer import StoreWriter
from qs.data.voc2007 import CLASSES, make_voc2007_detection
from qsrank.main import main
from tests.test_data_boxes import rcnn_arrays, voc_xml
from tests.test_data_formats import write_mat73
from tests.test_data_latent_list import write_latent, write_records

SMALL = {"scale": 0.01, "boxes_per_image": 12, "n_features": 16}


def tree_bytes(root):
    """{relative path: bytes} of every file under root."""
    root = Path(root)
    return {
        str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()
    }


def write_rcnn_dir(root, ks=(4, 3, 4, 2, 4), d=5, version="v5"):
    """Per-image R-CNN caches img0.mat, img1.mat ... with ks[i] boxes each."""
    root.mkdir(exist_ok=True)
    for i, k in enumerate(ks):
        arrays = rcnn_arrays(seed=i, k=k, d=d)
        (scipy.io.savemat if version == "v5" else write_mat73)(root / f"img{i}.mat", arrays)
    return root


def cli(*args):
    return CliRunner().invoke(main, ["load", "cnn", *map(str, args)])


# --- the synthetic generator: the same data in memory and in a store -----------------------


@pytest.mark.parametrize("dtype", ["float32", "float16"])
def test_synthetic_store_equals_the_in_memory_data(tmp_path, dtype):
    path = convert.write_synthetic_store(
        tmp_path / "s.zarr", split="test", seed=3, dtype=dtype, chunk_images=7, **SMALL
    )
    got = open_store(path).to_detection_data()
    want = make_voc2007_detection(3, **SMALL)["test"]
    np.testing.assert_array_equal(got.X, want.X.astype(dtype).astype(np.float32))
    for name in ("offsets", "boxes", "image_ids"):
        np.testing.assert_array_equal(getattr(got, name), getattr(want, name))
    for a, b in zip(got.objects, want.objects, strict=True):
        for x, y in zip(a, b, strict=True):
            np.testing.assert_array_equal(x, y)
    assert got.source == want.source and "not the paper's data" in got.source
    labels = open_store(path).labels[:]
    np.testing.assert_array_equal(
        labels, np.stack([want.image_labels(c) for c in range(len(CLASSES))], axis=1)
    )


def test_the_conversion_progress_bar_counts_every_image(tmp_path, monkeypatch):
    import tqdm

    finals = []

    class Recorded(tqdm.tqdm):
        def close(self):
            finals.append((self.n, self.total))
            super().close()

    monkeypatch.setattr(tqdm, "tqdm", Recorded)
    src = sources.RcnnSource(write_rcnn_dir(tmp_path / "mat"), "float32")
    convert.convert(src, tmp_path / "s.zarr", chunk_images=2, workers=0, progress=True)
    assert finals[-1] == (5, 5)


# --- layout, checksums, opening --------------------------------------------------------------


def test_store_layout_and_padding(tmp_path):
    src = sources.RcnnSource(write_rcnn_dir(tmp_path / "mat"), "float32")
    store = open_store(convert.convert(src, tmp_path / "s.zarr", chunk_images=2, workers=0))
    assert store.features.shape == (5, 4, 5) and store.features.chunks == (2, 4, 5)
    assert store.features.dtype == np.float32 and store.boxes.dtype == np.float32
    assert store.counts.dtype == np.int32 and store.labels.dtype == np.int8
    assert store.counts[:].tolist() == [4, 3, 4, 2, 4]
    assert store.boxes.chunks == (2, 4, 4) and store.labels.chunks == (2, 20)
    want = load_rcnn_cache(tmp_path / "mat")
    features, counts = store.features[:], store.counts[:]
    for i in range(5):
        a, b = want.offsets[i], want.offsets[i + 1]
        np.testing.assert_array_equal(features[i, : counts[i]], want.X[a:b])
        assert not features[i, counts[i] :].any() and not store.boxes[i, counts[i] :].any()
    assert store.image_ids[:].tolist() == ["img0", "img1", "img2", "img3", "img4"]
    attrs = store.attrs
    assert attrs["format"] == "qsrank-boxstore" and attrs["format_version"] == FORMAT_VERSION
    assert attrs["complete"] is True and attrs["classes"] == list(CLASSES)
    assert (attrs["d"], attrs["k_max"], attrs["dtype"]) == (5, 4, "float32")
    assert "R-CNN .mat caches, 5 files" in store.source
    assert sorted(attrs["checksums"]["features"]) == ["c/0/0/0", "c/1/0/0", "c/2/0/0"]
    dog = CLASSES.index("dog")  # every cache's box 0 is a ground-truth dog
    assert store.labels[:, dog].tolist() == [1] * 5 and store.labels[:].sum() == 5
    assert store.gt_offsets[:].tolist() == [0, 1, 2, 3, 4, 5]
    assert store.verify() == 3 * 5 + 4  # 3 blocks x 5 image arrays, 4 ground-truth arrays
    np.testing.assert_array_equal(store.dask_features().compute(), features)


def test_verify_names_the_damaged_chunk(tmp_path):
    path = convert.write_synthetic_store(tmp_path / "s.zarr", chunk_images=10, **SMALL)
    chunk = path / "features" / "c" / "2" / "0" / "0"
    data = bytearray(chunk.read_bytes())
    data[len(data) // 2] ^= 0x01
    chunk.write_bytes(bytes(data))
    with pytest.raises(
        ValueError,
        match=r"1 of \d+ chunks fail their checksum: features "
        r"chunk c/2/0/0; the store is damaged",
    ):
        open_store(path).verify()
    (path / "boxes" / "c" / "0" / "0" / "0").unlink()
    with pytest.raises(ValueError, match=r"2 of .*boxes chunk c/0/0/0 \(missing\)"):
        open_store(path).verify()


def flip(path, at, bit=0x01):
    data = bytearray(path.read_bytes())
    data[at] ^= bit
    path.write_bytes(bytes(data))


@pytest.fixture
def damaged(tmp_path):
    """A store, and a function giving a fresh copy with one chunk changed by `how`."""
    import shutil

    path = convert.write_synthetic_store(tmp_path / "s.zarr", chunk_images=10, **SMALL)

    def copy(name, key, how):
        dst = tmp_path / f"damaged{len(list(tmp_path.glob('damaged*')))}.zarr"
        shutil.copytree(path, dst)
        how(dst / name / key)
        return dst

    return path, copy


def test_every_chunk_is_verified_as_it_is_read(damaged):
    path, copy = damaged
    intact = open_store(path).to_detection_data()
    for name, key in [
        ("features", "c/2/0/0"),
        ("counts", "c/0"),
        ("gt_boxes", "c/0/0"),
        ("image_ids", "c/1"),
    ]:
        gone = copy(name, key, Path.unlink)
        with pytest.raises(
            StoreDamaged,
            match=rf"^{gone}: {name} chunk {key} is missing; the "
            rf"store is damaged \(qsrank load verify ",
        ):
            open_store(gone).to_detection_data()
        changed = copy(name, key, lambda p: flip(p, 3))
        with pytest.raises(
            StoreDamaged,
            match=rf"^{changed}: {name} chunk {key} fails its "
            "checksum",
        ):
            open_store(changed).to_detection_data()
    gone = copy("features", "c/4/0/0", Path.unlink)  # read block by block, by Dask
    with pytest.raises(StoreDamaged, match="features chunk c/4/0/0 is missing"):
        open_store(gone).dask_features().sum().compute()
    np.testing.assert_array_equal(open_store(path).to_detection_data().X, intact.X)


def test_any_flipped_byte_of_a_features_chunk_is_caught(damaged):
    path, copy = damaged
    chunk = "c/1/0/0"
    size = (path / "features" / chunk).stat().st_size
    rng = np.random.default_rng(0)
    for at, bit in zip(rng.integers(0, size, 20), rng.integers(0, 8, 20)):
        changed = copy("features", chunk, lambda p, at=at, bit=bit: flip(p, int(at), 1 << int(bit)))
        with pytest.raises(StoreDamaged, match=f"features chunk {chunk} fails its checksum"):
            open_store(changed).features[10:20]


def test_the_data_checksum_is_of_the_bytes(damaged):
    import hashlib
    import json

    path, copy = damaged
    store = open_store(path)
    # an intact store: the same value as the digest of its recorded checksums
    assert (
        store.data_checksum()
        == hashlib.sha256(json.dumps(store.attrs["checksums"], sort_keys=True).encode()).hexdigest()
    )
    changed = copy("features", "c/3/0/0", lambda p: flip(p, 7))
    with pytest.raises(StoreDamaged, match="features chunk c/3/0/0;"):
        open_store(changed).data_checksum()


def test_cli_verifies_a_store(damaged):
    path, copy = damaged
    n = sum(len(keys) for keys in open_store(path).attrs["checksums"].values())
    result = CliRunner().invoke(main, ["load", "verify", str(path)])
    assert (
        result.exit_code == 0 and f"{path}: all {n} chunks match their checksums" in result.output
    ), result.output
    changed = copy("labels", "c/1/0", lambda p: flip(p, 0))
    result = CliRunner().invoke(main, ["load", "verify", str(changed)])
    assert result.exit_code == 1, result.output
    assert (
        result.output.strip()
        .splitlines()[-1]
        .endswith(
            f"Error: {changed}: 1 of {n} chunks fail their checksum: labels chunk c/1/0; the "
            "store is damaged, convert the data again."
        )
    )


def test_open_refuses_unfinished_foreign_and_other_version_stores(tmp_path):
    import zarr

    path = convert.write_synthetic_store(tmp_path / "s.zarr", **SMALL)
    group = zarr.open_group(path, mode="r+")
    group.attrs["format_version"] = FORMAT_VERSION + 1
    with pytest.raises(
        ValueError,
        match=f"format version {FORMAT_VERSION + 1}; this qsrank reads version {FORMAT_VERSION}",
    ):
        open_store(path)
    group.attrs.update({"format_version": FORMAT_VERSION, "complete": False})
    with pytest.raises(ValueError, match="no completion mark"):
        open_store(path)
    with pytest.raises(ValueError, match=r"x\.zarr\.partial is an unfinished conversion"):
        open_store(tmp_path / "x.zarr.partial")
    (tmp_path / "y.zarr.partial").mkdir()
    with pytest.raises(
        ValueError,
        match=r"No box store at .*y\.zarr; .*y\.zarr\.partial "
        "holds an unfinished conversion",
    ):
        open_store(tmp_path / "y.zarr")
    zarr.open_group(tmp_path / "plain.zarr", mode="w")
    with pytest.raises(ValueError, match="not a qsrank-boxstore store"):
        open_store(tmp_path / "plain.zarr")
    (tmp_path / "empty").mkdir()
    with pytest.raises(ValueError, match="is not a box store"):
        open_store(tmp_path / "empty")


def test_to_detection_data_refuses_large_stores(tmp_path):
    store = open_store(convert.write_synthetic_store(tmp_path / "s.zarr", **SMALL))
    with pytest.raises(
        ValueError, match=r"38,400 bytes as float32, above max_bytes \(1,000\).*\(dask_features\)"
    ):
        store.to_detection_data(max_bytes=1000)


# --- never half-written, resumable -----------------------------------------------------------


def interrupt_after(monkeypatch, n_blocks):
    """Make StoreWriter.write_block fail once it has written `n_blocks` blocks."""
    original, written = StoreWriter.write_block, []

    def write_block(self, b, *args, **kwargs):
        if len(written) == n_blocks:
            raise KeyboardInterrupt
        written.append(b)
        return original(self, b, *args, **kwargs)

    monkeypatch.setattr(StoreWriter, "write_block", write_block)
    return written


def test_an_interrupted_conversion_resumes_to_the_same_bytes(tmp_path, monkeypatch):
    whole = convert.write_synthetic_store(tmp_path / "whole.zarr", chunk_images=6, **SMALL)
    out = tmp_path / "resumed.zarr"
    with monkeypatch.context() as m:
        interrupt_after(m, 3)
        with pytest.raises(KeyboardInterrupt):
            convert.write_synthetic_store(out, chunk_images=6, **SMALL)
    assert not out.exists() and (tmp_path / "resumed.zarr.partial" / "progress.json").is_file()
    with pytest.raises(ValueError, match="unfinished conversion"):
        open_store(tmp_path / "resumed.zarr.partial")
    written = interrupt_after(monkeypatch, 99)
    convert.write_synthetic_store(out, chunk_images=6, **SMALL)
    assert written == [3, 4, 5, 6, 7, 8]  # blocks 0-2 were skipped
    assert not (tmp_path / "resumed.zarr.partial").exists()
    assert tree_bytes(out) == tree_bytes(whole)


def test_a_damaged_block_of_a_partial_store_is_rewritten(tmp_path, monkeypatch):
    whole = convert.write_synthetic_store(tmp_path / "whole.zarr", chunk_images=10, **SMALL)
    out = tmp_path / "s.zarr"
    with monkeypatch.context() as m:
        interrupt_after(m, 3)
        with pytest.raises(KeyboardInterrupt):
            convert.write_synthetic_store(out, chunk_images=10, **SMALL)
    chunk = tmp_path / "s.zarr.partial" / "boxes" / "c" / "1" / "0" / "0"
    chunk.write_bytes(chunk.read_bytes()[:-3])  # a torn write
    written = interrupt_after(monkeypatch, 99)
    convert.write_synthetic_store(out, chunk_images=10, **SMALL)
    assert written == [1, 3, 4]
    assert tree_bytes(out) == tree_bytes(whole)


def test_a_partial_store_of_other_settings_is_refused(tmp_path, monkeypatch):
    out = tmp_path / "s.zarr"
    with monkeypatch.context() as m:
        interrupt_after(m, 1)
        with pytest.raises(KeyboardInterrupt):
            convert.write_synthetic_store(out, chunk_images=10, **SMALL)
    result = cli(
        "synthetic",
        "--out",
        out,
        "--scale",
        0.01,
        "--boxes",
        12,
        "--features",
        16,
        "--chunk-images",
        10,
        "--dtype",
        "float16",
        "--workers",
        1,
    )
    assert result.exit_code == 1, result.output
    assert (
        "holds an unfinished conversion made with other settings (dtype: 'float32' there, "
        "'float16' now); remove it" in result.output
    )
    assert len(result.output.strip().splitlines()[-1]) > 0
    assert (tmp_path / "s.zarr.partial" / "progress" / "000000.json").is_file()  # kept


def test_an_existing_store_is_never_overwritten(tmp_path):
    path = convert.write_synthetic_store(tmp_path / "s.zarr", **SMALL)
    before = tree_bytes(path)
    with pytest.raises(ValueError, match="exists; remove it or choose another --out"):
        convert.write_synthetic_store(path, seed=1, **SMALL)
    assert tree_bytes(path) == before


# --- a reader that crashes its process --------------------------------------------------------


class CrashingRcnnSource(sources.RcnnSource):
    """R-CNN caches whose reader kills its own process on the file named `crash_on`, as a
    corrupt .mat file can make scipy's or h5py's reader do."""

    crash_on = "img3.mat"

    def read(self, i):
        if self.paths[i].name == self.crash_on:
            os.kill(os.getpid(), signal.SIGSEGV)
        return super().read(i)


def test_a_crashing_reader_names_its_file_and_keeps_the_blocks_before(tmp_path, monkeypatch):
    mats = write_rcnn_dir(tmp_path / "mat", ks=(4, 3, 4, 2, 4, 3))
    whole = convert.convert(
        sources.RcnnSource(mats), tmp_path / "whole.zarr", chunk_images=1, workers=0
    )
    out = tmp_path / "s.zarr"
    with pytest.raises(
        ReaderCrash,
        match=r"img3\.mat: the reader process died "
        r"\(killed by SIGSEGV\) reading this file.* "
        r"\(3 of 6 blocks are kept in .*s\.zarr\."
        r"partial: rerun to resume\.\)",
    ):
        convert.convert(CrashingRcnnSource(mats), out, chunk_images=1, workers=2)
    written = interrupt_after(monkeypatch, 99)
    convert.convert(sources.RcnnSource(mats), out, chunk_images=1, workers=0)  # file fixed
    assert written == [3, 4, 5]
    assert tree_bytes(out) == tree_bytes(whole)


class CrashingScanSource(sources.RcnnSource):
    """R-CNN caches whose header reader aborts its process on img1.mat."""

    def shape(self, i):
        if self.paths[i].name == "img1.mat":
            os.abort()
        return super().shape(i)


def test_a_crash_while_scanning_names_the_file(tmp_path):
    mats = write_rcnn_dir(tmp_path / "mat", ks=(4, 3, 4))
    with pytest.raises(
        ReaderCrash,
        match=r"img1\.mat: the reader process died "
        r"\(killed by SIGABRT\)",
    ):
        convert.convert(CrashingScanSource(mats), tmp_path / "s.zarr", workers=1)
    assert not (tmp_path / "s.zarr.partial").exists() and not (tmp_path / "s.zarr").exists()


def test_cli_reports_a_crashing_reader_in_one_line(tmp_path, monkeypatch):
    mats = write_rcnn_dir(tmp_path / "mat", ks=(4, 3, 4, 2))
    monkeypatch.setattr(
        cli_load,
        "cnn_source",
        lambda source, dtype, split, **_: CrashingRcnnSource(source[0], dtype),
    )
    result = cli(mats, "--out", tmp_path / "s.zarr", "--workers", 2, "--chunk-images", 2)
    assert result.exit_code == 1, result.output
    error = result.output.strip().splitlines()[-1]
    assert error.startswith("Error: ") and "img3.mat: the reader process died" in error
    assert "1 of 2 blocks are kept" in error
    os.remove(mats / "img3.mat")  # the user removes the bad file and reruns: it resumes
    monkeypatch.undo()
    result = cli(mats, "--out", tmp_path / "s.zarr", "--workers", 1, "--chunk-images", 2)
    assert result.exit_code == 0, result.output
    assert "written: 1 chunks (1 resumed)" in result.stdout
    assert open_store(tmp_path / "s.zarr").image_ids[:].tolist() == ["img0", "img1", "img2"]


# --- the other sources through the command line ------------------------------------------------


def test_cli_converts_a_latent_list_file(tmp_path):
    path = write_latent(tmp_path)
    result = cli(
        path, "--out", tmp_path / "s.zarr", "--features", 4, "--dtype", "float32", "--workers", 1
    )
    assert result.exit_code == 0, result.output
    assert result.stdout.startswith("store: ") and "images: 2   boxes: 3" in result.stdout
    got = open_store(tmp_path / "s.zarr").to_detection_data()
    want = load_latent_list(path).data
    for name in ("X", "offsets", "boxes", "image_ids"):
        np.testing.assert_array_equal(getattr(got, name), getattr(want, name))
    assert (open_store(tmp_path / "s.zarr").labels[:] == -1).all()  # unknown without XML
    assert "latent AP-SVM list" in got.source and "pooled layout" in got.source


def test_cli_converts_an_unpooled_latent_list_file(tmp_path):
    """--layout unpooled: one stored image per example, an is_fs image split per box."""
    path = write_records(tmp_path, "unpooled", 1)
    result = cli(
        path,
        "--out",
        tmp_path / "s.zarr",
        "--features",
        1,
        "--dtype",
        "float32",
        "--workers",
        1,
        "--layout",
        "unpooled",
    )
    assert result.exit_code == 0, result.output
    got = open_store(tmp_path / "s.zarr").to_detection_data()
    want = load_latent_list(path, layout="unpooled").data
    for name in ("X", "offsets", "boxes", "image_ids"):
        np.testing.assert_array_equal(getattr(got, name), getattr(want, name))
    assert "unpooled layout" in got.source
    one_line_error(
        cli(path, "--out", tmp_path / "t.zarr", "--features", 1, "--workers", 1),
        "unpooled.txt, image 1 of 4 ('0'), box 1 of 1, token 4",
    )
    result = cli("synthetic", "--out", tmp_path / "u.zarr", "--layout", "pooled")
    assert result.exit_code == 2 and "--layout do not apply to synthetic data" in result.output


@pytest.mark.parametrize("version", ["v5", "v7.3"])
def test_cli_converts_rcnn_caches_with_annotations_and_an_image_set(tmp_path, version):
    mats = write_rcnn_dir(tmp_path / "mat", version=version)
    notes = tmp_path / "xml"
    notes.mkdir()
    for i in range(5):
        (notes / f"img{i}.xml").write_text(voc_xml(200, 150, (("cat", (5, 5, 40, 40), i % 2, 0),)))
    (tmp_path / "set.txt").write_text("img4\nimg0\n")
    result = cli(
        mats,
        "--out",
        tmp_path / "s.zarr",
        "--annotations",
        notes,
        "--image-set",
        tmp_path / "set.txt",
        "--workers",
        1,
    )
    assert result.exit_code == 0, result.output
    store = open_store(tmp_path / "s.zarr")
    assert store.image_ids[:].tolist() == ["img4", "img0"] and store.split == "set"
    assert store.dtype == np.float16 and store.gt_difficult[:].tolist() == [False, False]
    assert store.labels[:, CLASSES.index("cat")].tolist() == [1, 1]
    assert store.labels[:, CLASSES.index("dog")].tolist() == [0, 0]  # the XML replaces gt


# --- bad input: one line, exit 1, nothing written lost -----------------------------------------


def one_line_error(result, *fragments):
    assert result.exit_code == 1, result.output
    lines = result.output.strip().splitlines()
    assert lines[-1].startswith("Error: "), result.output
    assert "Traceback" not in result.output
    for fragment in fragments:
        assert fragment in lines[-1], lines[-1]


def test_bad_latent_lists(tmp_path):
    path = write_latent(tmp_path)
    out = tmp_path / "s.zarr"
    one_line_error(cli(path, "--out", out, "--workers", 1), "needs its feature dimension")
    (tmp_path / "000005_2.feature").unlink()
    one_line_error(
        cli(path, "--out", out, "--features", 4, "--workers", 1),
        "1 of 3 feature files are missing",
        "000005_2.feature (image 1, box 2)",
    )
    write_latent(tmp_path)
    path.write_text(path.read_text().replace("000005 2", "000005 3"))
    one_line_error(
        cli(path, "--out", out, "--features", 4, "--workers", 1),
        "list.txt, image 1 of 2 ('000005'), box 3 of 3, token 21 (line 7): expected "
        "the box label in -1, 0, 1; got 10",
    )
    write_latent(tmp_path)
    one_line_error(
        cli(path, "--out", out, "--features", 2, "--workers", 1),
        "000005_1.feature, line 1: pair 2 ('3:2.0') is beyond the 2 features",
    )
    path.write_text("2\n000005 2\n10 20 30 40 1 -1\n")
    one_line_error(
        cli(path, "--out", out, "--features", 4, "--workers", 1),
        "Truncated latent list file",
        "box 2 of 2 as token 10, but the file ends after token 9",
    )
    assert not out.exists()


def test_boxes_outside_the_image(tmp_path):
    path = write_latent(tmp_path)
    notes = tmp_path / "xml"
    notes.mkdir()
    for stem in ("000005", "000007"):
        (notes / f"{stem}.xml").write_text(voc_xml(45, 80, ()))
    one_line_error(
        cli(
            path,
            "--out",
            tmp_path / "a.zarr",
            "--features",
            4,
            "--annotations",
            notes,
            "--workers",
            1,
        ),
        "list.txt, image 1 ('000005'), box 2: box [1.0, 1.0, 50.0, 60.0] (x1 y1 x2 "
        "y2) is outside the image of 45 x 80 pixels",
    )
    mats = write_rcnn_dir(tmp_path / "mat", ks=(4,))
    (notes / "img0.xml").write_text(voc_xml(100, 100, ()))
    one_line_error(
        cli(mats, "--out", tmp_path / "b.zarr", "--annotations", notes, "--workers", 1),
        "img0.mat: boxes row 2 [100.0, 100.0, 150.0, 140.0] (x1 y1 x2 y2) is outside "
        "image 'img0' of 100 x 100 pixels",
    )


def test_bad_rcnn_caches_keep_what_was_converted(tmp_path):
    mats = write_rcnn_dir(tmp_path / "mat", ks=(4, 3, 4))
    scipy.io.savemat(mats / "img3.mat", rcnn_arrays(d=6))
    one_line_error(
        cli(mats, "--out", tmp_path / "s.zarr", "--workers", 1),
        "img3.mat: feat has 6 columns, but",
        "img0.mat has 5",
    )
    scipy.io.savemat(mats / "img3.mat", rcnn_arrays())
    good = (mats / "img3.mat").read_bytes()
    (mats / "img3.mat").write_bytes(good[:-40])  # truncated inside feat's data
    one_line_error(
        cli(mats, "--out", tmp_path / "s.zarr", "--workers", 1, "--chunk-images", 1),
        "Cannot read",
        "img3.mat",
        "3 of 4 blocks are kept in",
    )
    (mats / "img3.mat").write_bytes(good)
    result = cli(mats, "--out", tmp_path / "s.zarr", "--workers", 1, "--chunk-images", 1)
    assert result.exit_code == 0, result.output
    big = {**rcnn_arrays(), "feat": np.full((4, 5), 1e5)}
    scipy.io.savemat(mats / "img3.mat", big)
    one_line_error(
        cli(mats, "--out", tmp_path / "t.zarr", "--workers", 1),
        "img3.mat: feature value 100000 is beyond float16",
        "--dtype float32",
    )


# --- never deleting what qsrank did not make; crash windows; one-line errors ----------------


def killed():
    """Stands for a kill: the exception stops the writer where it is, and nothing after."""
    raise KeyboardInterrupt


def killed_at_rename(monkeypatch, name):
    """Stop the writer (`killed`) when it renames the directory `name`."""
    rename = os.rename

    def renamed(src, dst, *args, **kwargs):
        if Path(src).name == name:
            killed()
        return rename(src, dst, *args, **kwargs)

    monkeypatch.setattr(os, "rename", renamed)


def test_an_unrelated_partial_directory_is_never_removed(tmp_path):
    out = tmp_path / "x.zarr"
    foreign = tmp_path / "x.zarr.partial"
    foreign.mkdir()
    (foreign / "thesis.tex").write_text("years of work")
    result = cli("synthetic", "--out", out, "--scale", 0.01, "--workers", 1)
    assert result.exit_code == 1 and result.output.strip().splitlines()[-1] == (
        f"Error: {foreign} exists but holds no unfinished conversion qsrank can resume (no "
        "progress records); it is left as it is: remove it or choose another --out."
    )
    assert tree_bytes(foreign) == {"thesis.tex": b"years of work"} and not out.exists()


def test_a_kill_while_the_store_is_created_leaves_nothing_a_rerun_refuses(tmp_path, monkeypatch):
    """A new store is made in a hidden directory and renamed to OUT.partial once it holds its
    progress records; a kill before leaves that directory, which the next run removes."""
    out = tmp_path / "s.zarr"
    with monkeypatch.context() as m:
        killed_at_rename(m, f".s.zarr.partial.{os.getpid()}.tmp")
        with pytest.raises(KeyboardInterrupt):
            convert.write_synthetic_store(out, chunk_images=10, **SMALL)
    building = [p.name for p in tmp_path.iterdir()]
    assert building == [f".s.zarr.partial.{os.getpid()}.tmp"]
    convert.write_synthetic_store(out, chunk_images=10, **SMALL)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["s.zarr"]
    assert open_store(out).verify() > 0


@pytest.mark.parametrize("window", ["before the rename", "after the rename"])
def test_a_kill_inside_finish_is_repaired_by_a_rerun(tmp_path, monkeypatch, window):
    """`finish` is decided by one rename of OUT.partial to OUT: killed before it, a rerun
    resumes and finishes; killed after it, the store is whole and a rerun removes the progress
    records it still holds."""
    whole = convert.write_synthetic_store(tmp_path / "whole.zarr", chunk_images=10, **SMALL)
    out = tmp_path / "s.zarr"
    with monkeypatch.context() as m:
        if window == "before the rename":
            killed_at_rename(m, "s.zarr.partial")
        else:
            m.setattr("qs.data.store_writer._finish_cleanup", lambda path: killed())
        with pytest.raises(KeyboardInterrupt):
            convert.write_synthetic_store(out, chunk_images=10, **SMALL)
    if window == "before the rename":
        assert not out.exists()
        stats = {}
        convert.write_synthetic_store(out, chunk_images=10, stats=stats, **SMALL)
        assert stats["blocks_written"] == 0 and stats["blocks_resumed"] == 5
    else:
        assert (out / "progress.json").exists()
        open_store(out).verify()  # already whole and readable
        result = cli(
            "synthetic",
            "--out",
            out,
            "--scale",
            0.01,
            "--boxes",
            12,
            "--features",
            16,
            "--chunk-images",
            10,
            "--workers",
            1,
        )
        assert result.exit_code == 1 and "s.zarr exists" in result.output
    assert tree_bytes(out) == tree_bytes(whole)


def test_temporary_files_of_a_killed_writer_are_removed(tmp_path, monkeypatch):
    out = tmp_path / "s.zarr"
    with monkeypatch.context() as m:
        interrupt_after(m, 2)
        with pytest.raises(KeyboardInterrupt):
            convert.write_synthetic_store(out, chunk_images=10, **SMALL)
    partial = tmp_path / "s.zarr.partial"
    stale = [
        partial / "progress" / "000002.json.tmp",
        partial / "progress.json.tmp",
        partial / "features" / "c" / "2" / "0" / f"0.{'ab12' * 8}.partial",
        partial / f"zarr.{'0f' * 16}.partial",
    ]
    for path in stale:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(b"half")
    convert.write_synthetic_store(out, chunk_images=10, **SMALL)
    assert not any(p.name.endswith((".tmp", ".partial")) for p in out.rglob("*"))
    assert open_store(out).verify() > 0


def test_a_block_larger_than_memory_is_refused_before_anything_is_written(tmp_path):
    out = tmp_path / "s.zarr"
    result = cli("synthetic", "--boxes", 100_000_000, "--features", 100_000, "--out", out)
    assert result.exit_code == 1 and len(result.output.strip().splitlines()) == 1
    assert (
        "One block of 1 images x 100000000 boxes x 100000 features takes "
        "20,001,600,000,000 bytes, more than this machine's memory" in result.output
    )
    assert list(tmp_path.iterdir()) == []


def test_a_full_disk_names_the_store_and_says_a_rerun_resumes(tmp_path, monkeypatch):
    import errno

    import zarr.storage._local as local

    out, partial = tmp_path / "s.zarr", tmp_path / "s.zarr.partial"
    put, calls = local._put, []

    def full_disk(path, *args, **kwargs):
        if "features/c/2" in str(path):
            raise OSError(errno.ENOSPC, "No space left on device", str(path))
        calls.append(path)
        return put(path, *args, **kwargs)

    with monkeypatch.context() as m:
        m.setattr(local, "_put", full_disk)
        result = cli(
            "synthetic",
            "--out",
            out,
            "--scale",
            0.01,
            "--boxes",
            12,
            "--features",
            16,
            "--chunk-images",
            10,
            "--dtype",
            "float32",
            "--workers",
            1,
        )
    assert result.exit_code == 1 and result.output.strip().splitlines()[-1] == (
        f"Error: No space left on device writing block 2 of the store into {partial} (2 of 5 "
        f"blocks are kept in {partial}: rerun to resume.)"
    )
    stats = {}
    convert.write_synthetic_store(out, chunk_images=10, stats=stats, **SMALL)
    assert (stats["blocks_resumed"], stats["blocks_written"]) == (2, 3)


def _verify_in_a_process(path, timeout=120):
    """`qsrank load verify` in a process of its own, so that a read that blocks (a FIFO) or
    never ends (/dev/zero) fails the test instead of hanging it."""
    code = "import sys; from qsrank.main import main; main(sys.argv[1:], prog_name='qsrank')"
    return subprocess.run(
        [sys.executable, "-c", code, "load", "verify", str(path)],
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


@pytest.mark.parametrize("replacement", ["fifo", "dev-zero", "larger"])
def test_verify_reads_regular_chunks_only_and_bounded(tmp_path, replacement):
    path = convert.write_synthetic_store(tmp_path / "s.zarr", chunk_images=10, **SMALL)
    chunk = path / "features" / "c" / "1" / "0" / "0"
    chunk.unlink()
    if replacement == "fifo":
        os.mkfifo(chunk)
    elif replacement == "dev-zero":
        chunk.symlink_to("/dev/zero")
    else:  # a regular file far larger than any chunk of the array's shape
        with open(chunk, "wb") as fh:
            fh.truncate(2**26)
    result = _verify_in_a_process(path)
    assert result.returncode == 1, result.stderr
    why = "larger than the" if replacement == "larger" else "not a regular file"
    assert f"features chunk c/1/0/0 ({why}" in result.stderr and "Traceback" not in result.stderr, (
        result.stderr
    )


@pytest.mark.parametrize("where", ["zarr.json", "features/zarr.json"])
@pytest.mark.parametrize("replacement", ["fifo", "dev-zero"])
def test_verify_refuses_metadata_that_is_not_a_regular_file(tmp_path, where, replacement):
    """zarr opens a store's metadata itself: a FIFO there was waited on for ever."""
    path = convert.write_synthetic_store(tmp_path / "s.zarr", chunk_images=10, **SMALL)
    (path / where).unlink()
    if replacement == "fifo":
        os.mkfifo(path / where)
    else:
        (path / where).symlink_to("/dev/zero")
    result = _verify_in_a_process(path, timeout=60)
    assert result.returncode == 1 and "Traceback" not in result.stderr, result.stderr
    assert f"Cannot read the store's metadata {path / where}: it is a " in result.stderr


@pytest.mark.parametrize("edit", ["array", "both"])
def test_metadata_disagreeing_with_the_record_is_refused(tmp_path, edit):
    path = convert.write_synthetic_store(tmp_path / "s.zarr", chunk_images=10, **SMALL)
    meta = json.loads((path / "features" / "zarr.json").read_text())
    meta["shape"][0] = 10**12
    (path / "features" / "zarr.json").write_text(json.dumps(meta))
    if edit == "both":  # the group's record says so too: the checksums still cover 2 chunks
        group = json.loads((path / "zarr.json").read_text())
        group["attributes"]["n_images"] = 10**12
        (path / "zarr.json").write_text(json.dumps(group))
        for name in ("counts", "boxes", "labels", "image_ids"):
            meta = json.loads((path / name / "zarr.json").read_text())
            meta["shape"][0] = 10**12
            (path / name / "zarr.json").write_text(json.dumps(meta))
    words = (
        r"features has shape \(1000000000000, "
        if edit == "array"
        else r"the checksums of features cover \d+ chunks, not the 100000000000 of its "
        r"1000000000000 images"
    )
    with pytest.raises(StoreDamaged, match=words):
        open_store(path)
    result = _verify_in_a_process(path)
    assert result.returncode == 1 and "the store is damaged" in result.stderr, result.stderr
