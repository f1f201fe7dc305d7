"""qs.validation: arrays and tensors of scores and labels are accepted and refused alike."""

import subprocess
import sys

import numpy as np
import pytest

from qs.validation import (
    as_positive_mask,
    as_positive_mask2d,
    as_scores,
    check_counts,
    check_finite,
)

torch = pytest.importorskip("torch")

from qs.validation import (
    as_positive_tensor,
    as_query_rows,
    check_finite_tensor,
    check_scores,
)

ACCEPTED = [
    np.array([True, False, True, False]),
    np.array([1, 0, 1, 0], dtype=np.int8),
    np.array([1, -1, 1, -1], dtype=np.int64),
    np.array([1.0, 0.0, 1.0, -1.0], dtype=np.float32),
    np.array([1, 0, 1, 0], dtype=np.uint8),
]


@pytest.mark.parametrize("labels", ACCEPTED, ids=lambda a: str(a.dtype))
def test_array_and_tensor_labels_give_the_same_positives(labels):
    mask = as_positive_mask(labels, labels.size).astype(bool)
    scores = torch.zeros(labels.size)
    assert mask.tolist() == [True, False, True, False]
    assert as_positive_tensor(torch.from_numpy(labels), scores).tolist() == mask.tolist()
    assert as_positive_tensor(labels, scores).tolist() == mask.tolist()  # an array, converted


@pytest.mark.parametrize("dtype", [">i4", "<i2", ">f8", np.float16, np.int8, bool])
def test_one_and_several_queries_take_the_same_label_types(dtype):
    labels = np.array([[1, 0, 1], [0, 0, 1]]).astype(dtype)
    want = [[1, 0, 1], [0, 0, 1]]
    assert as_positive_mask2d(labels, (2, 3)).tolist() == want
    assert [as_positive_mask(row, 3).tolist() for row in labels] == want
    if dtype is not bool:
        bad = np.array([[1, 0, 1], [0, 0, 2]]).astype(dtype)
        with pytest.raises(ValueError, match=r"labels must be binary: .*2.* at query 1, sample 2"):
            as_positive_mask2d(bad, (2, 3))


@pytest.mark.parametrize(
    "bad, message",
    [
        (
            np.array([1, 0, -1, 2]),
            r"labels must be binary: 1 \(or True\) for a positive, 0 or -1 "
            r"\(or False\) for a negative; got .*2.* at index \(?3",
        ),
        (np.array([1.0, 0.5, 0.0, 1.0]), r"labels must be binary: .*got .*0\.5.* at index \(?1"),
        (np.array(["a", "b", "c", "d"]), r"labels must be bool or numeric"),
    ],
)
def test_array_and_tensor_labels_are_refused_alike(bad, message):
    with pytest.raises(ValueError, match=message):
        as_positive_mask(bad, bad.size)
    with pytest.raises(ValueError, match=message):
        as_positive_tensor(
            bad if bad.dtype.kind == "U" else torch.from_numpy(bad), torch.zeros(bad.size)
        )


def test_shape_mismatch_is_refused():
    with pytest.raises(ValueError, match="same length; got 3 scores and 4 labels"):
        as_positive_mask([1, 0, 1, 0], 3)
    with pytest.raises(ValueError, match=r"same shape; got scores \(3,\) and labels \(4,\)"):
        as_positive_tensor(torch.tensor([1, 0, 1, 0]), torch.zeros(3))


def test_non_finite_scores_are_named_with_their_index():
    with pytest.raises(
        ValueError,
        match=r"scores must be finite; got .*nan.* at index 2\. "
        r"Remove or impute NaN/inf scores before the metric",
    ):
        check_finite(as_scores([0.0, 1.0, np.nan, np.inf]), "the metric")
    with pytest.raises(
        ValueError,
        match=r"scores must be finite; got inf at index \(1, 0\)\. "
        r"Remove or impute NaN/inf scores before the loss",
    ):
        check_finite_tensor(torch.tensor([[0.0, 1.0], [float("inf"), 2.0]]))
    check_finite(as_scores([0.0, -1e308, 1e308]), "the metric")
    check_finite_tensor(torch.full((4,), 60000.0, dtype=torch.float16))  # the sum overflows


def test_scores_must_be_floating_point_tensors_of_one_or_two_dimensions():
    with pytest.raises(TypeError, match="torch.Tensor"):
        check_scores(np.zeros(3))
    with pytest.raises(ValueError, match="floating-point"):
        check_scores(torch.zeros(3, dtype=torch.int64))
    with pytest.raises(ValueError, match=r"1-D \(n,\) or 2-D"):
        check_scores(torch.zeros(1, 1, 3))


def test_a_ranking_needs_a_positive_and_a_negative():
    with pytest.raises(ValueError, match="no positive sample"):
        check_counts(0, 3)
    with pytest.raises(ValueError, match="no negative sample"):
        check_counts(3, 0)
    check_counts(1, 1)


def test_query_rows_of_one_and_of_several_queries():
    scores = torch.tensor([[0.5, -1.0, 2.0], [1.0, 0.0, 3.0]])
    rows, pos = as_query_rows(scores, np.array([[1, 0, -1], [0, 1, 1]]))
    assert rows is scores and pos.dtype == torch.bool
    assert pos.tolist() == [[True, False, False], [False, True, True]]
    one, one_pos = as_query_rows(scores[0], [True, False, False])
    assert one.shape == (1, 3) and torch.equal(one[0], scores[0])
    assert one_pos.tolist() == [[True, False, False]]


@pytest.mark.parametrize(
    "scores, labels, error, message",
    [
        (np.zeros(3), [1, 0, 0], TypeError, "torch.Tensor"),
        (torch.zeros(1, 1, 3), torch.ones(1, 1, 3), ValueError, r"1-D \(n,\) or 2-D"),
        (torch.zeros(3), [1, 0, 2], ValueError, "labels must be binary"),
        (torch.zeros(3), [1, 0], ValueError, "same shape"),
        (torch.tensor([0.0, float("nan"), 1.0]), [1, 0, 0], ValueError, "finite.*index \\(1,\\)"),
    ],
)
def test_query_rows_refuse_what_the_checks_refuse(scores, labels, error, message):
    with pytest.raises(error, match=message):
        as_query_rows(scores, labels)


def test_importing_the_checks_imports_no_torch_and_no_loss():
    imported = subprocess.run(
        [
            sys.executable,
            "-c",
            "import sys, qs.validation; print('qs.losses' in sys.modules, 'torch' in sys.modules)",
        ],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    assert imported == ["False", "False"]
