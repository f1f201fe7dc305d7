"""Box-feature readers (qs/data/boxes.py) on small files written here in each real format."""

import numpy as np
import pytest
import scipy.io

from qs.data import (load_image_set, load_latent_list, load_poselet, load_rcnn_cache,
                     load_voc_annotation)
from qs.data.voc2007 import CLASSES
from qs.metrics import voc_detection_ap

# Two images: (stem, image label, [(x, y, w, h, id, label, {index: value})]).
LATENT = [
    ("000005", 1, [(10, 20, 30, 40, 1, -1, {1: 0.5, 3: 2.0}), (1, 1, 50, 60, 2, 1, {2: 1.5})]),
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


def voc_xml(width=500, height=375, objects=(("dog", (48, 240, 195, 371), 0, 1),), dtd=""):
    objs = "".join(
        f"<object><name>{name}</name><truncated>{trunc}</truncated><difficult>{diff}"
        f"</difficult><bndbox><xmin>{b[0]}</xmin><ymin>{b[1]}</ymin><xmax>{b[2]}</xmax>"
        f"<ymax>{b[3]}</ymax></bndbox></object>" for name, b, diff, trunc in objects)
    return (f"{dtd}<annotation><folder>VOC2007</folder><filename>x.jpg</filename><size>"
            f"<width>{width}</width><height>{height}</height><depth>3</depth></size>{objs}"
            "</annotation>")


# --- latent AP-SVM list file ---------------------------------------------------------------

def test_latent_list_reads_boxes_features_and_labels(tmp_path):
    got = load_latent_list(write_latent(tmp_path))
    data = got.data
    np.testing.assert_array_equal(data.offsets, [0, 2, 3])
    np.testing.assert_array_equal(data.image_ids, ["000005", "000007"])
    np.testing.assert_array_equal(data.boxes, [[10, 20, 39, 59], [1, 1, 50, 60], [5, 5, 14, 14]])
    assert data.X.dtype == np.float32 and data.X.shape == (3, 4)  # d: the largest index
    np.testing.assert_array_equal(data.X, [[0.5, 0, 2, 0], [0, 1.5, 0, 0], [0, 0, 0, -1]])
    np.testing.assert_array_equal(got.box_labels, [-1, 1, 0])
    np.testing.assert_array_equal(got.image_labels, [1, 0])
    np.testing.assert_array_equal(got.box_ids, [1, 2, 4])
    assert all(b.shape == (0, 4) for b, _, _ in data.objects)
    assert "latent AP-SVM list" in data.source and "sha256" in data.source
    assert load_latent_list(tmp_path / "list.txt", n_features=6).data.X.shape == (3, 6)


def test_latent_list_shares_the_poselet_feature_parser(tmp_path):
    """One parser for both formats: the same corrupt pair fails the same way in each."""
    path = write_latent(tmp_path)
    (tmp_path / "000005_2.feature").write_text("1:0.5 2:1:3\n")
    with pytest.raises(ValueError, match=r"000005_2\.feature, line 1: pair 2 \('2:1:3'\) is "
                                         "not an index:value pair") as latent:
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
    with pytest.raises(ValueError, match=r"list\.txt: 6 of 8 feature files are missing from "
                                         r".*: img0_0\.feature \(line 3\); img2_2\.feature "
                                         r"\(line 9\).* and 1 more"):
        load_latent_list(path)


@pytest.mark.parametrize("text, message", [
    ("", r"Truncated latent list file .*list\.txt: expected the number of images after line 0"),
    ("2\n000005 1\n1 1 5 5 1 -1\n1\n", r"Truncated .*: expected the header .* of image 2 of 2 "
                                       "after line 4"),
    ("1\n000005 2\n1 1 5 5 1 -1\n1\n", r"line 4: image '000005' \(line 2\) declares 2 boxes, "
                                       "but box line 2 reads '1'"),
    ("1\n000005 1\n1 1 5 5 1 -1\n1 1 5 5 2 -1\n1\n",
     r"line 4: image '000005' \(line 2\) declares 1 boxes, but another line follows them"),
    ("1\n000005 1\n1 1 5 5 1 -1\n", r"Truncated .*: expected the label line of image '000005' "
                                    "after line 3"),
    ("1\n000005 1\n1 1 0 5 1 -1\n1\n", "line 3: box of image '000005' has width 0 and height "
                                       "5; both must be > 0"),
    ("1\n000005 1\n1 1 5 -2 1 -1\n1\n", "line 3: .* height -2; both must be > 0"),
    ("1\n000005 1\n1 x 5 5 1 -1\n1\n", "line 3: expected a box coordinate to be a finite "
                                       "number; got 'x'"),
    ("1\n000005 1\n1 nan 5 5 1 -1\n1\n", "line 3: expected a box coordinate to be a finite"),
    ("1\n000005 1\n1 1 5 5 a -1\n1\n", "line 3: expected the box id to be an integer; got 'a'"),
    ("1\n000005 1\n1 1 5 5 1 2\n1\n", r"line 3: expected the box label in -1, 0, 1; got 2"),
    ("1\n000005 1\n1 1 5 5 1 -1\npos\n", "line 4: expected the image label to be an integer"),
    ("x\n", "line 1: expected the number of images to be an integer; got 'x'"),
    ("1 2\n", r"line 1: expected the number of images \(one integer >= 0\); got '1 2'"),
    ("1\n000005 -1\n1\n", r"line 2: expected the number of boxes \(one integer >= 0\)"),
    ("1\n000005\n1\n", r"line 2: expected the header of image 1 of 1 \(STEM n_boxes\)"),
    ("1\n000005 1\n1 1 5 5 1 -1\n1\n7\n", "line 5: unexpected content after the 1 images"),
])
def test_latent_list_errors_name_file_and_line(tmp_path, text, message):
    (tmp_path / "000005_1.feature").write_text("1:1\n")
    path = tmp_path / "list.txt"
    path.write_text(text)
    with pytest.raises(ValueError, match=message) as err:
        load_latent_list(path)
    assert "list.txt" in str(err.value) and "\n" not in str(err.value)


def test_latent_list_feature_dimension(tmp_path):
    path = write_latent(tmp_path)
    with pytest.raises(ValueError, match=r"000005_1\.feature, line 1: pair 2 \('3:2.0'\) is "
                                         "beyond the 2 features expected"):
        load_latent_list(path, n_features=2)
    (tmp_path / "000007_4.feature").write_text("4:1e999\n")
    with pytest.raises(ValueError, match=r"000007_4\.feature, line 1: .* not finite"):
        load_latent_list(path)


def test_latent_list_with_annotations(tmp_path):
    path = write_latent(tmp_path)
    notes = {}
    for stem, objects in (("000005", (("dog", (1, 1, 50, 60), 0, 0),)),
                          ("000007", (("cat", (2, 2, 9, 9), 1, 0),))):
        (tmp_path / f"{stem}.xml").write_text(voc_xml(100, 80, objects))
        notes[stem] = load_voc_annotation(tmp_path / f"{stem}.xml")
    data = load_latent_list(path, annotations=notes).data
    np.testing.assert_array_equal(data.objects[0][0], [[1, 1, 50, 60]])
    assert data.image_labels(CLASSES.index("dog")).tolist() == [1, 0]
    # The supervised box is the dog: scoring it first finds the only non-difficult object.
    assert voc_detection_ap(np.repeat(data.image_ids, np.diff(data.offsets)), data.boxes,
                            [0.5, 1.0, 0.2], data.ground_truth(CLASSES.index("dog"))) == 1.0

    (tmp_path / "000005.xml").write_text(voc_xml(45, 80, ()))
    notes["000005"] = load_voc_annotation(tmp_path / "000005.xml")
    with pytest.raises(ValueError, match=r"list\.txt, line 4: box \[1\.0, 1\.0, 50\.0, 60\.0\] "
                                         r"\(x1 y1 x2 y2\) is outside image '000005' of 45 x 80"):
        load_latent_list(path, annotations=notes)
    del notes["000007"]
    notes["000005"] = load_voc_annotation(tmp_path / "000007.xml")
    with pytest.raises(ValueError, match="line 6: image '000007' has no annotation"):
        load_latent_list(path, annotations=notes)
