"""qs.data.poselet: the VOC2011 action poselet list and feature files, on small files
written here in the AP-SVM code's format; bad files named with their line."""

import numpy as np
import pytest
import scipy.sparse as sp

from qs.data import ACTIONS, N_FEATURES, load_poselet

# Three images, six boxes: (name, [(box id, bbox_label, {index: value})]).
IMAGES = [
    ("2011_000001", [(1, 2, {1: 0.5, 7: 1.25, 2401: 0.3}), (2, -1, {3: 2.0})]),
    ("2011_000002", [(1, 0, {}), (2, 2, {2400: 1.0, 2404: 0.75}), (3, 10, {5: 1.5, 6: 0.5})]),
    ("2011_000003", [(4, 5, {1: 1.0, 2402: 0.1})]),
]


def write_poselet(root, images=IMAGES, header=None):
    """A list file and its feature files in the AP-SVM code's format; returns the list path."""
    lines = [str(len(images) if header is None else header)]
    for name, boxes in images:
        lines.append(f"1 {boxes[0][1]} {name} {len(boxes)}")
        for box_id, label, feats in boxes:
            lines.append(f"{10 * box_id} 20 {30 + box_id} 40.5 {box_id} {label}")
            pairs = " ".join(f"{i}:{v}" for i, v in feats.items())
            (root / f"{name}_{box_id}.feature").write_text(pairs + "\n")
        lines.append("1")
    path = root / "trainval.txt"
    path.write_text("\n".join(lines) + "\n")
    return path


def expected_dense(bias=True):
    rows = [feats for _, boxes in IMAGES for _, _, feats in boxes]
    X = np.zeros((len(rows), N_FEATURES + bias))
    for r, feats in enumerate(rows):
        for i, v in feats.items():
            X[r, i - 1] = v
    if bias:
        X[:, -1] = 1.0
    return X


# --- poselet list + feature files ---------------------------------------------------------


@pytest.mark.parametrize("bias", [True, False])
def test_poselet_round_trip(tmp_path, bias):
    data = load_poselet(write_poselet(tmp_path), bias=bias)
    assert sp.isspmatrix_csr(data.X) and data.X.dtype == np.float64
    np.testing.assert_array_equal(data.X.toarray(), expected_dense(bias))
    np.testing.assert_array_equal(data.labels, [2, -1, 0, 2, 10, 5])
    np.testing.assert_array_equal(data.box_ids, [1, 2, 1, 2, 3, 4])
    assert list(data.image_names) == ["2011_000001"] * 2 + ["2011_000002"] * 3 + ["2011_000003"]
    np.testing.assert_array_equal(data.boxes[4], [30, 20, 33, 40.5])
    assert data.n_images == 3 and data.bias is bias
    assert "trainval.txt" in data.source and "sha256" in data.source


def test_poselet_labels_per_action(tmp_path):
    data = load_poselet(write_poselet(tmp_path))
    y, ignore = data.targets("phoning")  # action id 2
    np.testing.assert_array_equal(y, [1, 0, 0, 1, 0, 0])
    np.testing.assert_array_equal(ignore, [0, 0, 1, 0, 0, 0])
    assert data.targets(2)[0].tolist() == y.tolist()
    counts = data.positives_per_class()
    assert list(counts) == list(ACTIONS)
    assert counts["phoning"] == 2 and counts["walking"] == 1 and counts["ridingbike"] == 1
    with pytest.raises(ValueError, match="Unknown action 'dancing'"):
        data.targets("dancing")


def test_poselet_feature_dir_and_checksum(tmp_path):
    (tmp_path / "feat").mkdir()
    list_path = write_poselet(tmp_path / "feat")
    moved = tmp_path / "list.txt"
    moved.write_bytes(list_path.read_bytes())
    data = load_poselet(moved, feature_dir=tmp_path / "feat")
    assert (
        data.source.split("sha256 ")[1][:64]
        == __import__("hashlib").sha256(moved.read_bytes()).hexdigest()
    )
    with pytest.raises(
        ValueError, match=r"Missing or unreadable feature file .*2011_000001_1\.feature.*line 3"
    ):
        load_poselet(moved)


@pytest.mark.parametrize(
    "content, message",
    [
        ("1:0.5 3:1 2:2", r"2011_000001_1\.feature, line 1: pair 3 \('2:2'\) does not increase"),
        ("1:0.5\n3:1\n3:2", r"2011_000001_1\.feature, line 3: pair 3 \('3:2'\) does not increase"),
        ("0:1.0", r"line 1: pair 1 \('0:1.0'\) has index 0; indices are 1-based"),
        ("1:0.5 2405:1", r"pair 2 \('2405:1'\) is beyond the 2404 features.*n_features=2405"),
        ("1:0.5 7 9:1", r"pair 2 \('7'\) is not an index:value pair"),
        ("1:0.5 2:x", r"pair 2 \('2:x'\) has a value that is not a number"),
        ("1:0.5 2:1:3", r"pair 2 \('2:1:3'\) is not an index:value pair"),
        ("1:nan", r"pair 1 \('1:nan'\) has a value that is not finite"),
    ],
)
def test_poselet_bad_feature_file(tmp_path, content, message):
    list_path = write_poselet(tmp_path)
    (tmp_path / "2011_000001_1.feature").write_text(content)
    with pytest.raises(ValueError, match=message):
        load_poselet(list_path)


def test_poselet_with_bias_already_in_files(tmp_path):
    list_path = write_poselet(tmp_path)
    (tmp_path / "2011_000001_1.feature").write_text("1:0.5 2405:1\n")
    data = load_poselet(list_path, n_features=2405, bias=False)
    assert data.X.shape == (6, 2405) and data.X[0, 2404] == 1.0


def truncate(path, n_lines):
    path.write_text("\n".join(path.read_text().splitlines()[:n_lines]) + "\n")


@pytest.mark.parametrize(
    "edit, message",
    [
        (
            lambda p: truncate(p, 4),
            (
                r"Truncated .*trainval\.txt: expected the label line of image "
                r"'2011_000001' after line 4"
            ),
        ),
        (
            lambda p: truncate(p, 7),
            (
                r"Truncated .*: expected box 2 of 3 of image '2011_000002' "
                r"after line 7"
            ),
        ),
        (lambda p: truncate(p, 10), r"Truncated .*: expected the header of image 3 of 3"),
        (
            lambda p: p.write_text(
                p.read_text().replace("1 2 2011_000001 2", "1 2 2011_000001 two")
            ),
            r"trainval\.txt, line 2: expected n_candidates to be an integer; got 'two'",
        ),
        (
            lambda p: p.write_text(p.read_text().replace("10 20 31 40.5 1 2", "10 20 31 1 2")),
            r"trainval\.txt, line 3: expected box 1 of 2 .*min_x min_y width height id bbox_label",
        ),
        (
            lambda p: p.write_text(p.read_text() + "1 1 extra 0\n"),
            r"trainval\.txt, line 14: unexpected content after the 3 images",
        ),
        (lambda p: p.write_text(""), r"expected the number of images on the first line"),
    ],
)
def test_poselet_bad_list_file(tmp_path, edit, message):
    list_path = write_poselet(tmp_path)
    edit(list_path)
    with pytest.raises(ValueError, match=message):
        load_poselet(list_path)


@pytest.mark.parametrize("coordinate", ["nan", "inf", "-inf"])
def test_poselet_non_finite_box_coordinate(tmp_path, coordinate):
    list_path = write_poselet(tmp_path)
    list_path.write_text(list_path.read_text().replace("10 20 31 40.5", f"10 {coordinate} 31 40.5"))
    with pytest.raises(
        ValueError,
        match=rf"line 3: expected a box coordinate to be a finite "
        rf"number; got '{coordinate}'",
    ):
        load_poselet(list_path)


def test_poselet_fewer_images_than_declared(tmp_path):
    list_path = write_poselet(tmp_path, header=4)
    with pytest.raises(ValueError, match="Truncated .*expected the header of image 4 of 4"):
        load_poselet(list_path)
