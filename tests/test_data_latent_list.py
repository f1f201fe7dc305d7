"""The latent AP-SVM list reader (qs/data/latent_list.py) on small files written here in
both released layouts, with arbitrary line breaks."""

import numpy as np
import pytest

from qs.data import load_latent_list, load_poselet, load_voc_annotation
from qs.data.voc2007 import CLASSES
from qs.metrics import voc_detection_ap
from tests.test_data_boxes import voc_xml

# Two images: (stem, image label, [(x, y, w, h, id, label, {index: value})]).
LATENT = [
    ("000005", 1, [(10, 20, 30, 40, 1, -1, {1: 0.5, 3: 2.0}), (1, 1, 50, 60, 2, -1, {2: 1.5})]),
    ("000007", 0, [(5, 5, 10, 10, 4, 0, {4: -1.0})]),
]


def write_latent(root, images=LATENT, n_images=None):
    """A latent AP-SVM list file and its STEM_id.feature files; returns the list path."""
    lines = [str(len(images) if n_images is None else n_images)]
    for stem, image_label, boxes in images:
        lines.append(f"{stem} {len(boxes)}")
        for x, y, w, h, box_id, label, feats in boxes:
            lines.append(f"{x} {y} {w} {h} {box_id} {label}")
            pairs = " ".join(f"{i}:{v}" for i, v in feats.items())
            (root / f"{stem}_{box_id}.feature").write_text(pairs + "\n")
        lines.append(str(image_label))
    path = root / "list.txt"
    path.write_text("\n".join(lines) + "\n")
    return path


def test_latent_list_reads_boxes_features_and_labels(tmp_path):
    got = load_latent_list(write_latent(tmp_path))
    data = got.data
    np.testing.assert_array_equal(data.offsets, [0, 2, 3])
    np.testing.assert_array_equal(data.image_ids, ["000005", "000007"])
    np.testing.assert_array_equal(data.boxes, [[10, 20, 39, 59], [1, 1, 50, 60], [5, 5, 14, 14]])
    assert data.X.dtype == np.float32 and data.X.shape == (3, 4)  # d: the largest index
    np.testing.assert_array_equal(data.X, [[0.5, 0, 2, 0], [0, 1.5, 0, 0], [0, 0, 0, -1]])
    np.testing.assert_array_equal(got.box_labels, [-1, -1, 0])
    np.testing.assert_array_equal(got.image_labels, [1, 0])
    np.testing.assert_array_equal(got.box_ids, [1, 2, 4])
    np.testing.assert_array_equal(got.images, [0, 1])
    assert all(b.shape == (0, 4) for b, _, _ in data.objects)
    assert "latent AP-SVM list" in data.source and "sha256" in data.source
    assert load_latent_list(tmp_path / "list.txt", n_features=6).data.X.shape == (3, 6)


def test_latent_list_shares_the_poselet_feature_parser(tmp_path):
    """One parser for both formats: the same corrupt pair fails the same way in each."""
    path = write_latent(tmp_path)
    (tmp_path / "000005_2.feature").write_text("1:0.5 2:1:3\n")
    with pytest.raises(
        ValueError,
        match=r"000005_2\.feature, line 1: pair 2 \('2:1:3'\) is "
        "not an index:value pair",
    ) as latent:
        load_latent_list(path)
    poselet = tmp_path / "poselet.txt"
    poselet.write_text("1\n1 1 000005 1\n1 1 30 40 2 1\n1\n")
    with pytest.raises(ValueError) as other:
        load_poselet(poselet)
    assert str(other.value) == str(latent.value)


def test_latent_list_in_another_feature_dir(tmp_path):
    (tmp_path / "feats").mkdir()
    path = write_latent(tmp_path / "feats")
    moved = tmp_path / "list.txt"
    path.rename(moved)
    with pytest.raises(ValueError, match="feature files are missing"):
        load_latent_list(moved)
    assert load_latent_list(moved, tmp_path / "feats").data.X.shape == (3, 4)


def test_latent_list_names_missing_feature_files(tmp_path):
    images = [(f"img{i}", 1, [(1, 1, 5, 5, i, -1, {1: 1.0})]) for i in range(8)]
    path = write_latent(tmp_path, images)
    for i in (0, 2, 3, 4, 5, 7):
        (tmp_path / f"img{i}_{i}.feature").unlink()
    with pytest.raises(
        ValueError,
        match=r"list\.txt: 6 of 8 feature files are missing from "
        r".*: img0_0\.feature \(image 1, box 1\); "
        r"img2_2\.feature \(image 3, box 1\).* and 1 more",
    ):
        load_latent_list(path)


@pytest.mark.parametrize(
    "text, message",
    [
        (
            "",
            r"Truncated latent list file .*list\.txt: expected the number of images of the file's "
            "start as token 1, but the file ends after token 0",
        ),
        (
            "2\n000005 1\n1 1 5 5 1 -1\n1\n",
            r"Truncated .*: expected the stem of image 2 of 2 as "
            "token 11, but the file ends after token 10",
        ),
        (
            "1\n000005 2\n1 1 5 5 1 -1\n1\n",
            r"Truncated .*: expected the box's y of image 1 of 1 "
            r"\('000005'\), box 2 of 2 as token 11",
        ),
        (
            "1\n000005 1\n1 1 5 5 1 -1\n1 1 5 5 2 -1\n1\n",
            r"list\.txt, token 11 \(line 4\): unexpected content after the 1 images the file "
            "declares: '1'",
        ),
        (
            "1\n000005 1\n1 1 5 5 1 -1\n",
            r"Truncated .*: expected the image label of image 1 of 1 "
            r"\('000005'\) as token 10",
        ),
        (
            "1\n000005 1\n1 1 0 5 1 -1\n1\n",
            r"image 1 of 1 \('000005'\), box 1 of 1, token 6 \(line "
            r"3\): the box's width is 0; it must be > 0",
        ),
        (
            "1\n000005 1\n1 1 5 -2 1 -1\n1\n",
            r"box 1 of 1, token 7 \(line 3\): the box's height is "
            "-2; it must be > 0",
        ),
        (
            "1\n000005 1\n1 x 5 5 1 -1\n1\n",
            r"token 5 \(line 3\): expected the box's y to be a "
            "finite number; got 'x'",
        ),
        ("1\n000005 1\n1 nan 5 5 1 -1\n1\n", "token 5 .*: expected the box's y to be a finite"),
        (
            "1\n000005 1\n1 1 5 5 a -1\n1\n",
            r"box 1 of 1, token 8 \(line 3\): expected the box id to "
            "be an integer; got 'a'",
        ),
        ("1\n000005 1\n1 1 5 5 -3 -1\n1\n", "token 8 .*: expected the box id >= 0; got -3"),
        (
            "1\n000005 1\n1 1 5 5 1 2\n1\n",
            r"token 9 \(line 3\): expected the box label in -1, 0, 1; "
            "got 2",
        ),
        (
            "1\n000005 1\n1 1 5 5 1 -1\npos\n",
            r"image 1 of 1 \('000005'\), token 10 \(line 4\): "
            "expected the image label to be an integer",
        ),
        (
            "x\n",
            r"the file's start, token 1 \(line 1\): expected the number of images to be an "
            "integer; got 'x'",
        ),
        ("-1\n", "token 1 .*: expected the number of images >= 0; got -1"),
        ("1\n000005 -1\n1\n", r"token 3 \(line 2\): expected the number of boxes >= 0; got -1"),
        ("1\n000005\n", r"Truncated .*: expected the number of boxes of image 1 of 1 \('000005'\)"),
        (
            "1\n000\x005 1\n1 1 5 5 1 -1\n1\n",
            r"image 1 of 1, token 2 \(line 2\): the stem <5 characters, not shown> names no file",
        ),
        (
            "1\nfeats/ 1\n1 1 5 5 1 -1\n1\n",
            r"image 1 of 1, token 2 \(line 2\): the stem <6 characters, not shown> names no file",
        ),
        (
            "1\n000005 1\n1 1 5 5 1 -1\n1\n7\n",
            r"token 11 \(line 5\): unexpected content after the "
            "1 images",
        ),
        (
            "1\n000005 2\n1 1 5 5 1 1\n1 1 5 5 2 -1\n0\n",
            r"image 1 \('000005'\), token 16 \(line 5\): box 1 is a supervised positive \(box label "
            r"1\) in an image labelled 0; expected the image label 1",
        ),
    ],
)
def test_latent_list_errors_name_file_and_position(tmp_path, text, message):
    (tmp_path / "000005_1.feature").write_text("1:1\n")
    path = tmp_path / "list.txt"
    path.write_text(text)
    with pytest.raises(ValueError, match=message) as err:
        load_latent_list(path)
    assert "list.txt" in str(err.value) and "\n" not in str(err.value)


@pytest.mark.parametrize(
    "text, message",
    [
        (
            "1\n2 1 000005 1\n1 1 5 5 1 -1\n1\n",
            r"image 1 of 1, token 2 \(line 2\): expected is_fs "
            r"\(0 or 1\) in 0, 1; got 2",
        ),
        (
            "1\n0 5 000005 1\n1 1 5 5 1 -1\n1\n",
            "token 3 .*: expected the image label in -1, 0, 1; got 5",
        ),
        (
            "1\n1 1 000005 1\n1 1 5 5 1 -1\n1\n",
            r"box 1 of 1, token 11 \(line 3\): expected the box "
            "label in 0, 1; got -1",
        ),
        (
            "1\n0 1 000005 1\n1 1 5 5 1 -1\n",
            r"Truncated .*: expected the image label of image 1 of "
            r"1 \('000005'\) as token 12",
        ),
    ],
)
def test_unpooled_errors_name_file_and_position(tmp_path, text, message):
    (tmp_path / "000005_1.feature").write_text("1:1\n")
    path = tmp_path / "list.txt"
    path.write_text(text)
    with pytest.raises(ValueError, match=message):
        load_latent_list(path, layout="unpooled")


def test_latent_list_unknown_layout(tmp_path):
    with pytest.raises(ValueError, match="layout must be one of pooled, unpooled; got 'lines'"):
        load_latent_list(write_latent(tmp_path), layout="lines")


def scatter_lines(tokens, seed):
    """The tokens joined by a seeded mix of spaces, tabs, line breaks and blank lines."""
    rng = np.random.default_rng(seed)
    gaps = rng.choice([" ", "\t", "\n", "\n\n", "  \r\n", " \n\t"], size=len(tokens))
    return "".join(t + g for t, g in zip(tokens, gaps)).rstrip() + "\n"


# The same records in each layout: (is_fs, header label, stem, [(x y w h id box label)], label).
RECORDS = [
    (
        0,
        1,
        "img1",
        [(1, 1, 5, 5, 1, -1), (2, 2, 6, 6, 2, 1), (3, 3, 4, 4, 3, -1), (4, 4, 3, 3, 4, 1)],
        1,
    ),
    (0, 0, "img2", [(1, 1, 5, 5, 1, 0), (2, 2, 5, 5, 2, 0)], 0),
    (1, 1, "img3", [(1, 1, 5, 5, 1, 1), (2, 2, 5, 5, 2, 0), (3, 3, 5, 5, 3, 1)], 1),
    (0, 1, "img4", [(1, 1, 7, 7, 1, -1), (2, 2, 7, 7, 2, -1)], 1),
]


def write_records(root, layout, seed, records=RECORDS):
    """A list file of `records` in `layout`, tokens scattered over lines; feature files with
    value 10 * image + box at index 1."""
    tokens = [str(len(records))]
    for i, (is_fs, header, stem, boxes, label) in enumerate(records, 1):
        tokens += ([str(is_fs), str(header)] if layout == "unpooled" else []) + [
            stem,
            str(len(boxes)),
        ]
        for box in boxes:
            tokens += [str(v) for v in box]
            (root / f"{stem}_{box[4]}.feature").write_text(f"1:{10 * i + box[4]}\n")
        tokens.append(str(label))
    path = root / f"{layout}.txt"
    path.write_text(scatter_lines(tokens, seed))
    return path


@pytest.mark.parametrize("seed", range(3))
def test_pooled_layout_reads_tokens_and_splits_supervised_boxes(tmp_path, seed):
    """Pooled: the is_fs flags are not in this layout, so records 3's boxes form one bag
    unless supervised; record 1's supervised boxes 2 and 4 become examples of their own and
    its boxes 1 and 3 are dropped, as the released reader does."""
    records = [(0, h, stem, boxes, label) for _, h, stem, boxes, label in RECORDS]
    got = load_latent_list(write_records(tmp_path, "pooled", seed, records))
    # record 3 (labelled 1) has supervised boxes 1 and 3: two examples
    np.testing.assert_array_equal(got.data.offsets, [0, 1, 2, 4, 5, 6, 8])
    np.testing.assert_array_equal(got.data.X[:, 0], [12, 14, 21, 22, 31, 33, 41, 42])
    np.testing.assert_array_equal(
        got.data.image_ids, ["img1", "img1", "img2", "img3", "img3", "img4"]
    )
    np.testing.assert_array_equal(got.image_labels, [1, 1, 0, 1, 1, 1])
    np.testing.assert_array_equal(got.images, [0, 0, 1, 2, 2, 3])
    np.testing.assert_array_equal(got.box_labels, [1, 1, 0, 0, 1, 1, -1, -1])
    np.testing.assert_array_equal(got.data.boxes[:2], [[2, 2, 7, 7], [4, 4, 6, 6]])


@pytest.mark.parametrize("seed", range(3))
def test_unpooled_layout_reads_is_fs_records(tmp_path, seed):
    """Unpooled: no box is split off in an is_fs 0 record (supervised labels or not); an is_fs
    1 record gives one example per box, labelled by its box label."""
    got = load_latent_list(write_records(tmp_path, "unpooled", seed), layout="unpooled")
    np.testing.assert_array_equal(got.data.offsets, [0, 4, 6, 7, 8, 9, 11])
    np.testing.assert_array_equal(got.data.X[:, 0], [11, 12, 13, 14, 21, 22, 31, 32, 33, 41, 42])
    np.testing.assert_array_equal(
        got.data.image_ids, ["img1", "img2", "img3", "img3", "img3", "img4"]
    )
    np.testing.assert_array_equal(got.image_labels, [1, 0, 1, 0, 1, 1])
    np.testing.assert_array_equal(got.images, [0, 1, 2, 2, 2, 3])


def test_unpooled_label_is_the_one_after_the_boxes(tmp_path):
    """The released reader reads the header label and keeps the one after the boxes."""
    records = [(0, 0, "img1", [(1, 1, 5, 5, 1, -1)], 1), (0, 1, "img2", [(1, 1, 5, 5, 1, 0)], 0)]
    got = load_latent_list(write_records(tmp_path, "unpooled", 0, records), layout="unpooled")
    np.testing.assert_array_equal(got.image_labels, [1, 0])


def test_a_layout_read_as_the_other_fails_with_its_position(tmp_path):
    path = write_records(tmp_path, "unpooled", 0)
    with pytest.raises(
        ValueError,
        match=r"unpooled\.txt, image 1 of 4 \('0'\), box 1 of 1, "
        r"token 4 \(line \d+\): expected the box's x to be a "
        "finite number; got 'img1'",
    ):
        load_latent_list(path)


@pytest.mark.parametrize("cut", [1, 7, 40, -3])
def test_truncated_files_say_where_they_end(tmp_path, cut):
    path = write_records(tmp_path, "unpooled", 0)
    tokens = path.read_text().split()
    path.write_text(" ".join(tokens[:cut]) + "\n")
    with pytest.raises(
        ValueError,
        match=rf"Truncated latent list file .*: expected .* as token "
        rf"{len(tokens[:cut]) + 1}, but the file ends after "
        rf"token {len(tokens[:cut])}\.",
    ):
        load_latent_list(path, layout="unpooled")


def test_latent_list_feature_dimension(tmp_path):
    path = write_latent(tmp_path)
    with pytest.raises(
        ValueError,
        match=r"000005_1\.feature, line 1: pair 2 \('3:2.0'\) is "
        "beyond the 2 features expected \\(n_features=2\\)",
    ):
        load_latent_list(path, n_features=2)
    (tmp_path / "000007_4.feature").write_text("4:1e39\n")
    with pytest.raises(
        ValueError,
        match=r"000007_4\.feature: the feature values hold 1e\+39, "
        "beyond float32",
    ):
        load_latent_list(path)
    (tmp_path / "000007_4.feature").write_text("4:1e999\n")
    with pytest.raises(ValueError, match=r"000007_4\.feature, line 1: .* not finite"):
        load_latent_list(path)


def test_latent_list_with_annotations(tmp_path):
    path = write_latent(tmp_path)
    notes = {}
    for stem, objects in (
        ("000005", (("dog", (1, 1, 50, 60), 0, 0),)),
        ("000007", (("cat", (2, 2, 9, 9), 1, 0),)),
    ):
        (tmp_path / f"{stem}.xml").write_text(voc_xml(100, 80, objects))
        notes[stem] = load_voc_annotation(tmp_path / f"{stem}.xml")
    data = load_latent_list(path, annotations=notes).data
    np.testing.assert_array_equal(data.objects[0][0], [[1, 1, 50, 60]])
    assert data.image_labels(CLASSES.index("dog")).tolist() == [1, 0]
    # Box 2 is the dog: scoring it first finds the only non-difficult object.
    assert (
        voc_detection_ap(
            np.repeat(data.image_ids, np.diff(data.offsets)),
            data.boxes,
            [0.5, 1.0, 0.2],
            data.ground_truth(CLASSES.index("dog")),
        )
        == 1.0
    )

    (tmp_path / "000005.xml").write_text(voc_xml(45, 80, ()))
    notes["000005"] = load_voc_annotation(tmp_path / "000005.xml")
    with pytest.raises(
        ValueError,
        match=r"list\.txt, image 1 \('000005'\), box 2: box \[1\.0, "
        r"1\.0, 50\.0, 60\.0\] \(x1 y1 x2 y2\) is outside the "
        "image of 45 x 80",
    ):
        load_latent_list(path, annotations=notes)
    del notes["000007"]
    notes["000005"] = load_voc_annotation(tmp_path / "000007.xml")
    with pytest.raises(ValueError, match=r"image 2 \('000007'\): the image has no annotation"):
        load_latent_list(path, annotations=notes)
