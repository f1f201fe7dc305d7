"""Learning to rank with queries (pipelines/ltr.py): `qsrank fit` on data that name queries,
the metrics it writes against qs.metrics on a fit by hand, GroupKFold's choice of C, and the
data sets of `make ltr` (qs.data.letor)."""

import numpy as np
import pandas as pd
import pytest
from click.testing import CliRunner
from sklearn.datasets import dump_svmlight_file
from sklearn.model_selection import GroupKFold
from sklearn.preprocessing import StandardScaler

from qs.data.formats import names_queries
from qs.data.letor import LETOR_GRADES, load_modechoice, make_letor
from qs.estimators import RankSVM
from qs.metrics import mean_average_precision, ndcg_at_k
from qsrank.main import main
from qsrank.pipelines import _runner, ltr_data
from qsrank.pipelines import ltr as pipeline

LINEAR = ["ap_svm", "ndcg_svm", "pairwise_svm", "logistic"]


def qsrank(*args):
    return CliRunner().invoke(main, [str(a) for a in args])


def letor_files(tmp_path, n_queries=30, seed=0):
    """An svmlight train and test file with qid: (LETOR's format)."""
    data = make_letor(n_queries, docs_per_query=15, n_features=6, informative=4, seed=seed)
    cut = np.searchsorted(data.groups, int(n_queries * 0.7))
    paths = []
    for name, rows in (("train.svm", slice(0, cut)), ("test.svm", slice(cut, None))):
        dump_svmlight_file(
            data.X[rows], data.y[rows], str(tmp_path / name), query_id=data.groups[rows]
        )
        paths.append(tmp_path / name)
    return data, cut, paths


def boosters():
    """The fit runs every method: LightGBM and XGBoost come with the ltr extra."""
    pytest.importorskip("lightgbm")
    pytest.importorskip("xgboost")


def test_fit_on_svmlight_with_qid_learns_per_query(tmp_path):
    boosters()
    data, cut, (train, test) = letor_files(tmp_path)
    out = tmp_path / "run"
    result = qsrank("fit", train, "--test", test, "--C", "1", "--out", out)
    assert result.exit_code == 0, result.output
    for column in ("MAP", "NDCG@1", "NDCG@5", "NDCG@10", "P@10", "train (s)"):
        assert column in result.output
    for name in ("AP-SVM", "NDCG-SVM", "pairwise RankSVM", "logistic regression"):
        assert name in result.output
    metrics = pd.read_csv(out / "metrics.csv")
    per_query = pd.read_csv(out / "per_query.csv")
    test_queries = np.unique(data.groups[cut:])
    for method, rows in per_query.groupby("method"):
        np.testing.assert_array_equal(np.sort(rows["query"]), test_queries)
        mean = metrics.loc[metrics["method"] == method, "map"].item()
        assert rows["map"].mean() == pytest.approx(mean)
    # the AP-SVM's row is the estimator fitted by hand on the same scaled files
    scaler = StandardScaler().fit(data.X[:cut])
    est = RankSVM(loss="ap", C=1.0, max_iter=200, random_state=0).fit(
        scaler.transform(data.X[:cut]), data.y[:cut], groups=data.groups[:cut]
    )
    scores = est.decision_function(scaler.transform(data.X[cut:]))
    ap = metrics.set_index("method").loc["ap_svm"]
    assert ap["map"] == pytest.approx(
        mean_average_precision(data.y[cut:], scores, data.groups[cut:]), rel=1e-9
    )
    assert ap["ndcg@10"] == pytest.approx(
        ndcg_at_k(data.y[cut:], scores, data.groups[cut:], k=10), rel=1e-9
    )


def test_fit_on_a_table_with_a_group_column_holds_out_queries(tmp_path):
    boosters()
    data = make_letor(24, docs_per_query=10, n_features=4, informative=3, seed=1)
    frame = pd.DataFrame(data.X, columns=data.feature_names).assign(
        grade=data.y, query=[f"q{g}" for g in data.groups]
    )
    frame.to_csv(tmp_path / "t.csv", index=False)
    out = tmp_path / "run"
    result = qsrank(
        "fit",
        tmp_path / "t.csv",
        "--label-column",
        "grade",
        "--group-column",
        "query",
        "--C",
        "1",
        "--out",
        out,
    )
    assert result.exit_code == 0, result.output
    per_query = pd.read_csv(out / "per_query.csv")
    held_out = set(per_query["query"])
    assert len(held_out) == 8 and held_out <= set(frame["query"])  # ceil(0.3 x 24)


def test_npz_with_groups_names_queries(tmp_path):
    X, y = np.zeros((4, 2)), np.array([0, 1, 0, 1])
    np.savez(tmp_path / "q.npz", X=X, y=y, groups=np.array([1, 1, 2, 2]))
    np.savez(tmp_path / "p.npz", X=X, y=y)
    dump_svmlight_file(X, y, str(tmp_path / "p.svm"))
    assert names_queries(tmp_path / "q.npz")
    assert not names_queries(tmp_path / "p.npz")
    assert not names_queries(tmp_path / "p.svm")


def test_options_of_the_one_ranking_fit_are_refused_per_query(tmp_path):
    _, _, (train, _) = letor_files(tmp_path)
    result = qsrank("fit", train, "--loss", "ndcg", "--out", tmp_path / "run")
    assert result.exit_code != 0
    assert "--loss does not apply when the data name queries" in result.output
    assert not (tmp_path / "run").exists()


def test_grades_the_boosters_cannot_take_are_refused(tmp_path):
    boosters()
    data = make_letor(10, docs_per_query=8, n_features=3, informative=3)
    dump_svmlight_file(data.X, data.y + 0.5, str(tmp_path / "t.svm"), query_id=data.groups)
    result = qsrank("fit", tmp_path / "t.svm", "--out", tmp_path / "run")
    assert result.exit_code != 0 and "integer grades 0-30" in result.output
    assert not (tmp_path / "run").exists()


def test_cv_chooses_C_by_groupkfold_map():
    data = make_letor(40, docs_per_query=12, n_features=5, informative=4, seed=2)
    cfg = _runner.resolve(
        pipeline.SPEC, {"datasets": ["synthetic"], "C": [0.01, 1.0, 100.0], "methods": ["logistic"]}
    )
    split = ltr_data.scaled(data.X, data.y, data.groups, data.X, data.y, data.groups, "")
    C, how, cv_map = pipeline.choose_C(cfg, "logistic", split)
    by_hand = []
    for c in cfg["C"]:
        maps = []
        for tr, va in GroupKFold(3).split(split.X_train, groups=data.groups):
            assert not set(data.groups[tr]) & set(data.groups[va])  # no query split
            score = pipeline.fit_method(
                cfg, "logistic", c, split.X_train[tr], data.y[tr], data.groups[tr]
            )
            maps.append(
                mean_average_precision(data.y[va], score(split.X_train[va]), data.groups[va])
            )
        by_hand.append(np.mean(maps))
    assert cfg["C"][int(np.argmax(by_hand))] == C and how == "3-fold GroupKFold"
    assert cv_map == pytest.approx(max(by_hand))


@pytest.mark.parametrize("method", [m for m in pipeline.METHODS if m not in LINEAR])
def test_every_booster_ranks_better_than_chance(method):
    pytest.importorskip("lightgbm" if method.startswith("lgbm") else "xgboost")
    data = make_letor(40, docs_per_query=20, n_features=6, informative=4, seed=3)
    cfg = _runner.resolve(pipeline.SPEC, {"rounds": 20})
    score = pipeline.fit_method(cfg, method, None, data.X, data.y, data.groups)
    trained = mean_average_precision(data.y, score(data.X), data.groups)
    chance = np.mean(
        [
            mean_average_precision(
                data.y, np.random.default_rng(s).random(data.y.size), data.groups
            )
            for s in range(5)
        ]
    )
    assert trained > chance + 0.1


def test_letor_generator_is_letor_shaped_and_seeded():
    data = make_letor(300, docs_per_query=40, n_features=12, informative=6, seed=4)
    shares = np.bincount(data.y, minlength=5) / data.y.size
    np.testing.assert_allclose(shares, LETOR_GRADES, atol=2e-3)
    sizes = np.bincount(data.groups)
    assert 30 <= np.median(sizes) <= 50 and sizes.min() >= 5
    assert np.all(np.diff(data.groups) >= 0) and "synthetic" in data.source
    again = make_letor(300, docs_per_query=40, n_features=12, informative=6, seed=4)
    np.testing.assert_array_equal(data.X, again.X)
    with pytest.raises(ValueError, match="grades must be"):
        make_letor(5, grades=[0.5, 0.6])


def test_modechoice_is_one_query_per_traveller():
    pytest.importorskip("statsmodels")
    data = load_modechoice()
    assert data.X.shape == (840, 16)
    assert np.unique(data.groups).size == 210
    np.testing.assert_array_equal(np.bincount(data.groups)[1:], 4)
    np.testing.assert_array_equal(np.bincount(data.groups, weights=data.y)[1:], 1)
    assert "real data" in data.source


def test_a_missing_booster_library_is_said_in_one_line(monkeypatch):
    real = ltr_data.importlib.util.find_spec
    monkeypatch.setattr(
        ltr_data.importlib.util, "find_spec", lambda name: None if name == "xgboost" else real(name)
    )
    cfg = _runner.resolve(pipeline.SPEC, {"datasets": ["synthetic"]})
    with pytest.raises(ValueError, match="xgb_rank_map needs xgboost: install the ltr extra"):
        pipeline.load_data(cfg)
