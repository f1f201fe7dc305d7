"""Released latent list files whose stems hold paths (qs/data/latent_list.py): absolute stems
read as given, relative ones against the list's folder or the feature directory, in both
layouts; a features root that confines every stem and refuses one leading out."""

import os

import numpy as np
import pytest
from click.testing import CliRunner

from qs.data import load_latent_list, load_voc_annotation
from qs.data.store import open_store
from qsrank.main import main
from tests.test_data_boxes import voc_xml
from tests.test_data_latent_list import LATENT, RECORDS, write_latent, write_records


def with_stems(records, prefix):
    """`RECORDS` (is_fs, header, stem, boxes, label) with ``prefix`` before every stem."""
    return [
        (is_fs, header, f"{prefix}{stem}", boxes, label)
        for is_fs, header, stem, boxes, label in records
    ]


def same_data(got, want):
    for name in ("X", "offsets", "boxes"):
        np.testing.assert_array_equal(getattr(got.data, name), getattr(want.data, name))
    for name in ("box_labels", "image_labels", "box_ids", "images"):
        np.testing.assert_array_equal(getattr(got, name), getattr(want, name))


def plain(tmp_path, layout):
    """The records with plain stems, features beside the list: what path stems must equal."""
    (tmp_path / "plain").mkdir(exist_ok=True)
    return load_latent_list(write_records(tmp_path / "plain", layout, 0), layout=layout)


@pytest.mark.parametrize("layout", ["pooled", "unpooled"])
def test_absolute_stems_are_read_as_given(tmp_path, layout):
    feats = tmp_path / "data" / "features"
    feats.mkdir(parents=True)
    (tmp_path / "lists").mkdir()
    records = with_stems(RECORDS, f"{feats}/")
    path = write_records(tmp_path / "lists", layout, 1, records)  # features written by stem
    assert not list((tmp_path / "lists").glob("*.feature"))
    got = load_latent_list(path, layout=layout)
    same_data(got, plain(tmp_path, layout))
    assert got.data.image_ids[0] == f"{feats}/img1"  # the stem as written
    # a feature directory does not move absolute stems
    same_data(load_latent_list(path, tmp_path / "lists", layout=layout), got)


@pytest.mark.parametrize("layout", ["pooled", "unpooled"])
def test_relative_stems_against_the_list_folder_or_the_feature_dir(tmp_path, layout):
    (tmp_path / "features" / "voc").mkdir(parents=True)
    (tmp_path / "lists").mkdir()
    path = write_records(tmp_path / "lists", layout, 2, with_stems(RECORDS, "../features/voc/"))
    same_data(load_latent_list(path, layout=layout), plain(tmp_path, layout))

    path.rename(tmp_path / "elsewhere.txt")  # no longer beside ../features: a feature dir
    text = (tmp_path / "elsewhere.txt").read_text().replace("../features/voc/", "voc/")
    (tmp_path / "elsewhere.txt").write_text(text)
    with pytest.raises(ValueError, match="feature files are missing"):
        load_latent_list(tmp_path / "elsewhere.txt", layout=layout)
    got = load_latent_list(tmp_path / "elsewhere.txt", tmp_path / "features", layout=layout)
    same_data(got, plain(tmp_path, layout))
    assert got.data.image_ids[0] == "voc/img1"


def test_annotations_are_found_by_the_stems_last_component(tmp_path):
    (tmp_path / "feats").mkdir()
    images = [(f"{tmp_path}/feats/{stem}", label, boxes) for stem, label, boxes in LATENT]
    path = write_latent(tmp_path, images)
    notes = {}
    for stem in ("000005", "000007"):
        (tmp_path / f"{stem}.xml").write_text(voc_xml(100, 80, (("dog", (1, 1, 50, 60), 0, 0),)))
        notes[stem] = load_voc_annotation(tmp_path / f"{stem}.xml")
    data = load_latent_list(path, annotations=notes).data
    np.testing.assert_array_equal(data.objects[1][0], [[1, 1, 50, 60]])


@pytest.mark.parametrize("layout", ["pooled", "unpooled"])
def test_a_features_root_reads_the_stems_inside_it(tmp_path, layout):
    root = tmp_path / "root"
    (root / "a" / "b").mkdir(parents=True)
    records = with_stems(RECORDS, f"{root}/a/")  # absolute, inside
    records[1] = (*records[1][:2], "../root/a/b/img2", *records[1][3:])  # relative, inside
    (tmp_path / "lists").mkdir()
    path = write_records(tmp_path / "lists", layout, 0, records)
    got = load_latent_list(path, layout=layout, feature_root=root)
    same_data(got, plain(tmp_path, layout))


@pytest.mark.parametrize(
    "stem", ["../outside/img9", "../root/../outside/img9", "{tmp}/outside/img9", "link/img9"]
)
def test_a_features_root_refuses_a_stem_leading_out(tmp_path, stem):
    """'..' out of the root, an absolute path elsewhere, a link inside the root to a folder
    outside it: each refused in one line naming the image and box, the stem not shown."""
    root, outside = tmp_path / "root", tmp_path / "outside"
    root.mkdir()
    outside.mkdir()
    os.symlink(outside, root / "link")
    stem = stem.format(tmp=tmp_path)
    images = [
        ("img1", 1, [(1, 1, 5, 5, 1, -1, {1: 1.0})]),
        (stem, 0, [(1, 1, 5, 5, 3, 0, {2: 1.0})]),
    ]
    path = write_latent(root, images)
    assert load_latent_list(path).data.X.shape == (2, 2)  # unconfined: read
    with pytest.raises(
        ValueError,
        match=r"list\.txt, image 2 \(<\d+ characters, not shown>\), "
        r"box 1: its feature file lies outside the features "
        "root .*root; expected every stem to stay inside it",
    ) as err:
        load_latent_list(path, feature_root=root)
    assert "\n" not in str(err.value) and "outside/img9" not in str(err.value)


def test_a_features_root_must_be_a_directory(tmp_path):
    path = write_latent(tmp_path)
    with pytest.raises(
        ValueError,
        match=r"list\.txt: the features root .*nowhere is not a "
        "directory",
    ):
        load_latent_list(path, feature_root=tmp_path / "nowhere")


def cli(*args):
    return CliRunner().invoke(main, ["load", "cnn", *map(str, args)])


def test_cli_reads_path_stems_and_confines_them(tmp_path):
    root = tmp_path / "root"
    (root / "feats").mkdir(parents=True)
    (tmp_path / "lists").mkdir()
    images = [(f"{root}/feats/{stem}", label, boxes) for stem, label, boxes in LATENT]
    path = write_latent(tmp_path / "lists", images)
    result = cli(
        path,
        "--out",
        tmp_path / "s.zarr",
        "--features",
        4,
        "--dtype",
        "float32",
        "--workers",
        1,
        "--features-root",
        root,
    )
    assert result.exit_code == 0, result.output
    got = open_store(tmp_path / "s.zarr").to_detection_data()
    want = load_latent_list(path).data
    for name in ("X", "offsets", "boxes", "image_ids"):
        np.testing.assert_array_equal(getattr(got, name), getattr(want, name))
    assert f"confined to {root.resolve()}" in got.source

    result = cli(
        path,
        "--out",
        tmp_path / "t.zarr",
        "--features",
        4,
        "--workers",
        1,
        "--features-root",
        root / "feats" / "..",
        "--features-dir",
        tmp_path,
    )
    assert result.exit_code == 0, result.output  # absolute stems: --features-dir moves none
    result = cli(
        path,
        "--out",
        tmp_path / "u.zarr",
        "--features",
        4,
        "--workers",
        1,
        "--features-root",
        tmp_path / "lists",
    )
    assert result.exit_code == 1 and "Traceback" not in result.output
    assert result.output.strip().splitlines()[-1].startswith("Error: ")
    assert "image 1 (<" in result.output and "lies outside the features root" in result.output
    result = cli("synthetic", "--out", tmp_path / "v.zarr", "--features-root", root)
    assert (
        result.exit_code == 2 and "--features-root do not apply to synthetic data" in result.output
    )
