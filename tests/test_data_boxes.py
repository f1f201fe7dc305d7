"""The R-CNN cache and VOC devkit readers (qs/data/boxes.py) on small files written here in
each real format."""

import numpy as np
import pytest
import scipy.io

from qs.data import load_image_set, load_rcnn_cache, load_voc_annotation
from qs.data.voc2007 import CLASSES
from qs.metrics import voc_detection_ap
from tests.test_data_formats import write_mat73


def voc_xml(width=500, height=375, objects=(("dog", (48, 240, 195, 371), 0, 1),), dtd=""):
    objs = "".join(
        f"<object><name>{name}</name><truncated>{trunc}</truncated><difficult>{diff}"
        f"</difficult><bndbox><xmin>{b[0]}</xmin><ymin>{b[1]}</ymin><xmax>{b[2]}</xmax>"
        f"<ymax>{b[3]}</ymax></bndbox></object>"
        for name, b, diff, trunc in objects
    )
    return (
        f"{dtd}<annotation><folder>VOC2007</folder><filename>x.jpg</filename><size>"
        f"<width>{width}</width><height>{height}</height><depth>3</depth></size>{objs}"
        "</annotation>"
    )


# --- R-CNN per-image .mat caches -----------------------------------------------------------


def rcnn_arrays(seed=0, k=4, d=5):
    """One image's cache: box 0 a ground-truth dog, the others candidates."""
    rng = np.random.default_rng(seed)
    boxes = np.array(
        [[10, 10, 60, 80], [12, 11, 58, 79], [100, 100, 150, 140], [1, 1, 20, 20]][:k], dtype=float
    )
    overlap = np.zeros((k, len(CLASSES)))
    overlap[:, CLASSES.index("dog")] = [1.0, 0.85, 0.0, 0.02][:k]
    return {
        "boxes": boxes,
        "feat": rng.normal(size=(k, d)).astype(np.float32),
        "gt": np.array([[1], [0], [0], [0]][:k], dtype=np.uint8),
        "class": np.array([[CLASSES.index("dog") + 1], [0], [0], [0]][:k], dtype=np.uint8),
        "overlap": overlap,
    }


@pytest.mark.parametrize("version", ["v5", "v7.3"])
def test_rcnn_cache_reads_both_mat_versions(tmp_path, version):
    for i in range(2):
        arrays = rcnn_arrays(seed=i)
        if version == "v5":
            scipy.io.savemat(tmp_path / f"00000{i}.mat", arrays)
        else:
            write_mat73(tmp_path / f"00000{i}.mat", arrays)
    data = load_rcnn_cache(tmp_path)
    np.testing.assert_array_equal(data.image_ids, ["000000", "000001"])
    np.testing.assert_array_equal(data.offsets, [0, 4, 8])
    np.testing.assert_array_equal(
        data.X, np.concatenate([rcnn_arrays(0)["feat"], rcnn_arrays(1)["feat"]])
    )
    np.testing.assert_array_equal(data.boxes[:4], rcnn_arrays()["boxes"])
    gt_boxes, cls, difficult = data.objects[0]
    np.testing.assert_array_equal(gt_boxes, [[10, 10, 60, 80]])
    assert cls.tolist() == [CLASSES.index("dog")] and difficult.tolist() == [False]
    assert "R-CNN .mat caches, 2 files" in data.source
    one = load_rcnn_cache([tmp_path / "000001.mat"])
    assert one.n_images == 1 and one.X.shape == (4, 5)


def test_rcnn_cache_ground_truth_scores_detections(tmp_path):
    """The gt boxes score detections: the overlap-ranked candidates find every dog once."""
    for i in range(3):
        scipy.io.savemat(tmp_path / f"img{i}.mat", rcnn_arrays(seed=i))
    data = load_rcnn_cache(tmp_path)
    dog = CLASSES.index("dog")
    candidates = np.ones(data.X.shape[0], bool)
    candidates[data.offsets[:-1]] = False  # drop the gt rows themselves
    ids = np.repeat(data.image_ids, np.diff(data.offsets))[candidates]
    scores = np.tile([1.0, 0.85, 0.0, 0.02], 3)[candidates]
    assert voc_detection_ap(ids, data.boxes[candidates], scores, data.ground_truth(dog)) == 1.0
    assert voc_detection_ap(ids, data.boxes[candidates], -scores, data.ground_truth(dog)) < 1.0


def test_rcnn_cache_without_ground_truth(tmp_path):
    arrays = rcnn_arrays()
    scipy.io.savemat(tmp_path / "a.mat", {"boxes": arrays["boxes"], "feat": arrays["feat"]})
    data = load_rcnn_cache(tmp_path / "a.mat")
    assert data.objects[0][0].shape == (0, 4)


def _damage(arrays, name, value):
    return {**arrays, name: value}


@pytest.mark.parametrize(
    "change, message",
    [
        (lambda a: _damage(a, "feat", a["feat"][:3]), r"boxes must have shape \(3, 4\)"),
        (lambda a: _damage(a, "boxes", a["boxes"][:, :3]), r"boxes must have shape \(4, 4\)"),
        (
            lambda a: _damage(a, "feat", np.where(np.eye(4, 5) > 0, np.nan, a["feat"])),
            r"feat must be finite; got nan at flat index 0 \(4 non-finite in all\)",
        ),
        (
            lambda a: _damage(a, "boxes", a["boxes"][:, [2, 1, 0, 3]]),
            r"boxes row 0 is \[60.0, 10.0, 10.0, 80.0\]; expected 1-based x1 y1 x2 y2",
        ),
        (lambda a: _damage(a, "boxes", a["boxes"] - 1), "boxes row 3 is .*expected 1-based"),
        (
            lambda a: {k: v for k, v in a.items() if k != "feat"},
            "no variable feat; an R-CNN cache "
            "holds boxes and feat; this file "
            "holds boxes, class, gt, overlap",
        ),
        (lambda a: _damage(a, "gt", a["gt"][:2]), r"gt must have shape \(4,\)"),
        (lambda a: _damage(a, "gt", a["gt"] * 2), "gt must hold 0 or 1 per box"),
        (lambda a: _damage(a, "class", a["class"] + 30), "class must be 1..20 on every gt box"),
        (lambda a: {k: v for k, v in a.items() if k != "class"}, "gt is given without class"),
        (
            lambda a: _damage(a, "overlap", a["overlap"][:, :5]),
            r"overlap must have shape \(4, 20\)",
        ),
        (
            lambda a: _damage(a, "feat", np.full((4, 5), -1e300)),
            "feat hold -1e\\+300, beyond float32",
        ),
    ],
)
@pytest.mark.parametrize("version", ["v5", "v7.3"])
def test_rcnn_cache_errors_name_the_file(tmp_path, change, message, version):
    scipy.io.savemat(tmp_path / "good.mat", rcnn_arrays())
    bad = change(rcnn_arrays())
    (scipy.io.savemat if version == "v5" else write_mat73)(tmp_path / "bad.mat", bad)
    with pytest.raises(ValueError, match=r"bad\.mat: " + message):
        load_rcnn_cache(tmp_path)


def test_rcnn_cache_text_features(tmp_path):
    """v5 only: h5py writes no MATLAB char arrays."""
    scipy.io.savemat(tmp_path / "bad.mat", {**rcnn_arrays(), "feat": np.array(["ab", "cd"])})
    with pytest.raises(ValueError, match=r"bad\.mat: feat must hold numbers; got dtype <U2"):
        load_rcnn_cache(tmp_path)


def test_rcnn_cache_feature_dimension_must_agree(tmp_path):
    scipy.io.savemat(tmp_path / "a.mat", rcnn_arrays(d=5))
    scipy.io.savemat(tmp_path / "b.mat", rcnn_arrays(d=6))
    with pytest.raises(ValueError, match=r"b\.mat: feat has 6 columns, but .*a\.mat has 5"):
        load_rcnn_cache(tmp_path)


@pytest.mark.parametrize("version", ["v5", "v7.3"])
def test_rcnn_cache_corrupt_files(tmp_path, version):
    path = tmp_path / "a.mat"
    (scipy.io.savemat if version == "v5" else write_mat73)(path, rcnn_arrays())
    path.write_bytes(path.read_bytes()[:700])
    with pytest.raises(ValueError, match=r"Cannot read .*a\.mat as MATLAB"):
        load_rcnn_cache(tmp_path)
    with pytest.raises(ValueError, match=r"empty: no \.mat files"):
        (tmp_path / "empty").mkdir()
        load_rcnn_cache(tmp_path / "empty")
    with pytest.raises(ValueError, match=r"Cannot read .*missing\.mat"):
        load_rcnn_cache([tmp_path / "missing.mat"])


# --- VOC devkit annotations and image sets -------------------------------------------------


def test_voc_annotation(tmp_path):
    path = tmp_path / "000005.xml"
    path.write_text(
        voc_xml(
            objects=(
                ("chair", (263, 211, 324, 339), 0, 0),
                ("chair", (5, 244, 67, 374), 1, 1),
                ("dog", (48, 240, 195.0, 371), 0, 1),
            )
        )
    )
    note = load_voc_annotation(path)
    assert (note.image_id, note.width, note.height) == ("000005", 500, 375)
    assert note.names == ("chair", "chair", "dog")
    np.testing.assert_array_equal(note.boxes[2], [48, 240, 195, 371])
    assert note.classes.tolist() == [CLASSES.index("chair")] * 2 + [CLASSES.index("dog")]
    assert note.difficult.tolist() == [False, True, False]
    assert note.truncated.tolist() == [False, True, True]
    empty = tmp_path / "e.xml"
    empty.write_text(voc_xml(objects=()))
    assert load_voc_annotation(empty).boxes.shape == (0, 4)


def test_voc_annotation_scores_detections(tmp_path):
    """Ground truth from XML into detection AP: the difficult chair counts neither way."""
    path = tmp_path / "000005.xml"
    path.write_text(
        voc_xml(objects=(("chair", (263, 211, 324, 339), 0, 0), ("chair", (5, 244, 67, 374), 1, 0)))
    )
    note = load_voc_annotation(path)
    chair = CLASSES.index("chair")
    truth = {
        note.image_id: (note.boxes[note.classes == chair], note.difficult[note.classes == chair])
    }
    detections = np.array([[5, 244, 67, 374], [263, 211, 324, 339], [400, 10, 450, 60]])
    ids = ["000005"] * 3
    assert voc_detection_ap(ids, detections, [3.0, 2.0, 1.0], truth) == 1.0
    # A false positive first, then the chair: precision 1/2 at every recall level.
    assert voc_detection_ap(ids, detections, [1.0, 2.0, 3.0], truth) == 0.5


@pytest.mark.parametrize(
    "xml, message",
    [
        (
            voc_xml(objects=(("person", (1, 1, 5, 5), 0, 0), ("unicorn", (1, 1, 5, 5), 0, 0))),
            "object 2 has class 'unicorn'; expected one of aeroplane",
        ),
        (voc_xml().replace("<ymax>371</ymax>", ""), "object 1 has no bndbox/ymax field"),
        (
            voc_xml().replace("<xmin>48</xmin>", "<xmin>4a</xmin>"),
            "object 1 has bndbox/xmin '4a'; expected an integer",
        ),
        (voc_xml(width=100), r"object 1 \(dog\) has bndbox \[48, 240, 195, 371\] .* xmax <= 100"),
        (
            voc_xml(objects=(("dog", (0, 1, 5, 5), 0, 0),)),
            r"object 1 \(dog\) has bndbox \[0, 1, 5, 5\] .*expected 1 <= xmin",
        ),
        (
            voc_xml(objects=(("dog", (9, 1, 5, 5), 0, 0),)),
            r"object 1 \(dog\) has bndbox \[9, 1, 5, 5\]",
        ),
        (
            voc_xml(objects=(("dog", (1, 1, 5, 5), 2, 0),)),
            "object 1 has difficult 2; expected 0 or 1",
        ),
        (voc_xml().replace("<height>375</height>", ""), "the image has no size/height field"),
        (voc_xml(width=0, objects=()), "image size 0 x 375"),
        (voc_xml()[:-20], "Cannot read the VOC annotation .*ParseError"),
        (
            voc_xml(dtd='<!DOCTYPE lolz [<!ENTITY lol "lol"><!ENTITY lol2 "&lol;&lol;">]>').replace(
                "VOC2007", "&lol2;"
            ),
            "Cannot read the VOC annotation .*DTDForbidden",
        ),
        (voc_xml(dtd='<!DOCTYPE a SYSTEM "file:///etc/passwd">'), "DTDForbidden"),
    ],
)
def test_voc_annotation_errors(tmp_path, xml, message):
    path = tmp_path / "a.xml"
    path.write_text(xml)
    with pytest.raises(ValueError, match=message) as err:
        load_voc_annotation(path)
    assert "a.xml" in str(err.value)


def test_image_sets(tmp_path):
    plain = tmp_path / "trainval.txt"
    plain.write_text("000005\n000007\n\n000009\n")
    ids, labels = load_image_set(plain)
    assert ids.tolist() == ["000005", "000007", "000009"] and labels is None
    per_class = tmp_path / "aeroplane_trainval.txt"
    per_class.write_text("000005 -1\n000007  1\n000009  0\n")
    ids, labels = load_image_set(per_class)
    assert ids.tolist() == ["000005", "000007", "000009"] and labels.tolist() == [-1, 1, 0]
    empty = tmp_path / "empty.txt"
    empty.write_text("")
    assert load_image_set(empty)[0].size == 0


@pytest.mark.parametrize(
    "text, message",
    [
        ("000005 -1\n000007\n", r"line 2: expected 2 field\(s\) as on line 1; got '000007'"),
        ("000005 1\n000007 2\n", "line 2: expected the label 1, -1 or 0; got '2'"),
        ("000005\n000007\n000005\n", "line 3: image '000005' is listed twice"),
        ("000005 1 x\n", "line 1: expected an image id, or an id and a label"),
    ],
)
def test_image_set_errors(tmp_path, text, message):
    path = tmp_path / "set.txt"
    path.write_text(text)
    with pytest.raises(ValueError, match=r"set\.txt, " + message):
        load_image_set(path)
    with pytest.raises(ValueError, match=r"Cannot read the image set .*nope\.txt"):
        load_image_set(tmp_path / "nope.txt")
