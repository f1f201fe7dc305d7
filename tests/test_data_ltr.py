"""Learning-to-rank files: the query id of each row from svmlight/LETOR files (qid: and
trailing comments), .npz files (groups) and CSV/TSV/Parquet tables (a group column), rows in
the file's order, and a query split over the file refused naming the line that breaks it."""

import numpy as np
import pandas as pd
import pytest
import scipy.io
from sklearn.datasets import dump_svmlight_file, load_svmlight_file

from qs.data.formats import check_query_order, load_features
from qs.data.tables import read_table

# LETOR 4.0's layout: a header comment, qids not in ascending order but each query's lines
# together, a comment after every line, a blank line.
LETOR = """\
# LETOR-style file written by the tests
2 qid:10 1:0.5 3:1.0 # docid = GX000-00-0000000 inc = 1 prob = 0.0246
0 qid:10 2:0.25 #docid = GX000-01-0000001

1 qid:3 1:1 2:-1 3:0.5 # docid = GX000-02-0000002
0 qid:3 3:2 # docid = GX000-03-0000003
4 qid:7 1:3 # docid = GX000-04-0000004
"""
X_LETOR = [[0.5, 0, 1], [0, 0.25, 0], [1, -1, 0.5], [0, 0, 2], [3, 0, 0]]


def write(path, text):
    path.write_text(text)
    return path


def test_letor_file_reads_qids_labels_and_features(tmp_path):
    path = write(tmp_path / "train.svm", LETOR)
    X, y, groups = load_features(path, query_id=True)
    np.testing.assert_array_equal(X.toarray(), X_LETOR)
    np.testing.assert_array_equal(y, [2, 0, 1, 0, 4])
    np.testing.assert_array_equal(groups, [10, 10, 3, 3, 7])  # the file's order, not sorted


def test_without_query_ids_reads_as_before(tmp_path):
    """Asked for no qids, a LETOR file reads as scikit-learn reads it: two values, X and y."""
    path = write(tmp_path / "train.svm", LETOR)
    got = load_features(path)
    X, y = load_svmlight_file(str(path))
    assert len(got) == 2
    np.testing.assert_array_equal(got[0].toarray(), X.toarray())
    np.testing.assert_array_equal(got[1], y)
    scattered = write(tmp_path / "scattered.svm", "1 qid:1 1:1\n0 qid:2 1:2\n1 qid:1 1:3\n")
    np.testing.assert_array_equal(load_features(scattered)[1], [1, 0, 1])
    assert read_table(scattered).groups is None


@pytest.mark.parametrize("seed", range(3))
def test_round_trip_through_scikit_learn(tmp_path, seed):
    rng = np.random.default_rng(seed)
    groups = np.repeat(rng.permutation(20)[:6], rng.integers(1, 6, 6))
    X = rng.random((groups.size, 4)) * (rng.random((groups.size, 4)) < 0.6)
    y = rng.integers(0, 5, groups.size)
    dump_svmlight_file(X, y, str(tmp_path / "f.svm"), query_id=groups, zero_based=False)
    X2, y2, groups2 = load_features(tmp_path / "f.svm", query_id=True, n_features=4)
    np.testing.assert_allclose(X2.toarray(), X, rtol=1e-15)
    np.testing.assert_array_equal(y2, y)
    np.testing.assert_array_equal(groups2, groups)


def test_a_query_split_over_the_file_is_refused_naming_the_line(tmp_path):
    """Lines count from 1 in the file, comments and blank lines included."""
    text = LETOR + "1 qid:10 1:1 # docid = GX000-05-0000005\n"
    path = write(tmp_path / "train.svm", text)
    with pytest.raises(
        ValueError,
        match=r"train\.svm, line 8: query '10' comes back after "
        r"other queries \(it was last on line 3\); expected "
        "each query's rows together",
    ) as err:
        load_features(path, query_id=True)
    assert "\n" not in str(err.value)
    with pytest.raises(ValueError, match="line 8: query '10' comes back"):
        read_table(path, groups=True)
    assert load_features(path)[0].shape == (6, 3)  # without qids: read as before


def test_a_line_without_qid_is_named(tmp_path):
    path = write(tmp_path / "train.svm", LETOR + "1 1:1 # no qid\n")
    with pytest.raises(
        ValueError,
        match=r"train\.svm, line 8: no qid; expected 'LABEL qid:ID "
        r"INDEX:VALUE \.\.\.' on every line \(1 of 6 lines",
    ):
        load_features(path, query_id=True)
    path = write(tmp_path / "plain.svm", "1 1:1\n0 2:1\n")
    with pytest.raises(ValueError, match=r"plain\.svm, line 1: no qid.*\(2 of 2 lines"):
        load_features(path, query_id=True)


def test_npz_groups(tmp_path):
    X, y = np.arange(12.0).reshape(6, 2), np.array([1, 0, 2, 0, 1, 0])
    groups = np.array(["q2", "q2", "q1", "q1", "q1", "q9"])
    np.savez(tmp_path / "f.npz", X=X, y=y, groups=groups)
    X2, y2, g2 = load_features(tmp_path / "f.npz", query_id=True)
    np.testing.assert_array_equal(X2, X)
    np.testing.assert_array_equal(y2, y)
    np.testing.assert_array_equal(g2, groups)
    table = read_table(tmp_path / "f.npz", groups=True)
    np.testing.assert_array_equal(table.groups, groups)
    assert read_table(tmp_path / "f.npz", labels=False, groups=True).y is None
    assert len(load_features(tmp_path / "f.npz")) == 2


@pytest.mark.parametrize(
    "groups, message",
    [
        (None, r"f\.npz: missing groups; expected .* and y, groups; got X, y"),
        (
            np.array([1, 1, 2]),
            r"groups must hold one query id \(integer or string\) per row of X "
            r"\(4\); got int64 of shape \(3,\)",
        ),
        (np.array([1.0, 1.0, 2.0, 2.0]), "got float64 of shape"),
        (np.array([[1, 1, 2, 2]]), r"got int64 of shape \(1, 4\)"),
        (
            np.array([1, 2, 1, 3]),
            r"f\.npz, row 2 of groups: query '1' comes back after other "
            r"queries \(it was last on row 0 of groups\)",
        ),
    ],
)
def test_npz_bad_groups(tmp_path, groups, message):
    arrays = {"X": np.ones((4, 2)), "y": np.zeros(4)}
    if groups is not None:
        arrays["groups"] = groups
    np.savez(tmp_path / "f.npz", **arrays)
    with pytest.raises(ValueError, match=message):
        load_features(tmp_path / "f.npz", query_id=True)


def test_mat_holds_no_query_ids(tmp_path):
    scipy.io.savemat(tmp_path / "f.mat", {"X": np.ones((2, 2)), "y": np.ones((2, 1))})
    with pytest.raises(
        ValueError,
        match=r"f\.mat: query ids are read from svmlight \(qid:\) "
        r"and \.npz \(groups\) files",
    ):
        load_features(tmp_path / "f.mat", query_id=True)


def frame():
    return pd.DataFrame(
        {
            "f1": [0.5, 1.0, 2.0, 3.0, 4.0],
            "query": ["b", "b", "a", "a", "c"],
            "label": [2, 0, 1, 0, 3],
            "f2": [1.0, 0.0, 1.0, 0.0, 1.0],
        }
    )


@pytest.mark.parametrize("suffix", [".csv", ".tsv", ".parquet"])
def test_table_group_column(tmp_path, suffix):
    if suffix == ".parquet":
        pytest.importorskip("pyarrow")
    path = tmp_path / f"f{suffix}"
    df = frame()
    if suffix == ".parquet":
        df.to_parquet(path)
    else:
        df.to_csv(path, sep="\t" if suffix == ".tsv" else ",", index=False)
    table = read_table(path, label_column="label", group_column="query")
    np.testing.assert_array_equal(table.groups, ["b", "b", "a", "a", "c"])
    np.testing.assert_array_equal(table.y, [2, 0, 1, 0, 3])
    assert table.feature_names == ["f1", "f2"]
    np.testing.assert_array_equal(table.X, df[["f1", "f2"]].to_numpy())
    scoring = read_table(path, label_column="label", labels=False, group_column="query")
    assert scoring.y is None and scoring.feature_names == ["f1", "f2"]
    np.testing.assert_array_equal(scoring.groups, table.groups)
    with pytest.raises(ValueError, match="feature column 'query' holds text"):
        read_table(path, label_column="label")  # without a group column: a feature, as before


def test_table_integer_query_ids(tmp_path):
    path = tmp_path / "f.csv"
    df = frame().assign(query=[7, 7, 3, 3, 9])
    df.to_csv(path, index=False)
    table = read_table(path, label_column="label", group_column="query")
    assert table.groups.dtype == np.int64
    np.testing.assert_array_equal(table.groups, [7, 7, 3, 3, 9])
    plain = read_table(path, label_column="label")  # no group column named: read as before
    assert plain.groups is None and plain.feature_names == ["f1", "query", "f2"]


@pytest.mark.parametrize(
    "edit, kwargs, message",
    [
        (
            lambda df: df.assign(query=["b", "a", "b", "a", "c"]),
            {},
            r"f\.csv, data row 3 \(line 4 of a text file\): query 'b' comes back after other queries "
            r"\(it was last on data row 1 \(line 2 of a text file\)\)",
        ),
        (
            lambda df: df.assign(query=["b", "b", None, "a", "c"]),
            {},
            r"group column 'query' is empty in data row 3 \(line 4 of a text file\) \(1 missing",
        ),
        (
            lambda df: df,
            {"group_column": "qid"},
            "no group column 'qid'; its columns: 'f1', 'query', 'label', 'f2'",
        ),
        (
            lambda df: df,
            {"group_column": None, "groups": True},
            r"name its group column, the query id of each row \(one of 'f1', 'query'",
        ),
        (
            lambda df: df,
            {"group_column": "label"},
            "the group column and the label column are both 'label'",
        ),
        (
            lambda df: df[["query", "label"]],
            {},
            "no feature column besides the label and group columns 'label', 'query'",
        ),
    ],
)
def test_table_bad_groups(tmp_path, edit, kwargs, message):
    path = tmp_path / "f.csv"
    edit(frame()).to_csv(path, index=False)
    kwargs = {"group_column": "query", **kwargs}
    with pytest.raises(ValueError, match=message):
        read_table(path, label_column="label", **kwargs)


def test_group_column_applies_to_tables_only(tmp_path):
    path = write(tmp_path / "train.svm", LETOR)
    with pytest.raises(
        ValueError,
        match=r"train\.svm: a \.svm file holds its query ids itself "
        r"\(qid: or groups\); a group column applies to CSV",
    ):
        read_table(path, group_column="qid")
    np.testing.assert_array_equal(read_table(path, groups=True).groups, [10, 10, 3, 3, 7])


@pytest.mark.parametrize(
    "groups, bad",
    [
        ([1, 1, 2, 2, 3], None),
        (["x"], None),
        ([], None),
        ([3, 1, 2], None),
        ([1, 2, 1], 2),
        ([1, 1, 2, 3, 3, 2], 5),
        (["a", "b", "b", "a", "a"], 3),
    ],
)
def test_check_query_order(groups, bad):
    """A query id may not come back after another; the first row that does is named."""
    if bad is None:
        check_query_order("f", groups, str)
    else:
        with pytest.raises(ValueError, match=rf"^f, {bad}: query"):
            check_query_order("f", groups, str)
