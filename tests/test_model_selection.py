"""qs.model_selection: choosing C by cross-validation."""

import numpy as np
import pytest
from sklearn.datasets import make_classification
from sklearn.linear_model import LogisticRegression
from sklearn.metrics import make_scorer, roc_auc_score
from sklearn.model_selection import GridSearchCV, GroupKFold, KFold, StratifiedKFold

from qs.model_selection import choose_C, estimator_fit_score


def by_C(table):
    """A fit-and-score step whose validation score is table[C], whatever the rows."""
    return lambda C, train, validation: table[C]


def test_the_best_mean_score_wins():
    choice = choose_C(by_C({0.1: 0.2, 1.0: 0.9, 10.0: 0.5}), [0.1, 1.0, 10.0], KFold(2), np.ones(4))
    assert (choice.C, choice.index) == (1.0, 1)
    assert choice.best_score == 0.9
    assert choice.fold_scores["score"].tolist() == [[0.2, 0.2], [0.9, 0.9], [0.5, 0.5]]


def test_a_tie_goes_to_the_smallest_C_whatever_the_order_given():
    table = {10.0: 0.7, 0.1: 0.3, 1.0: 0.7, 100.0: 0.7}
    choice = choose_C(by_C(table), [10.0, 0.1, 100.0, 1.0], KFold(2), np.ones(4))
    assert (choice.C, choice.index) == (1.0, 3)
    assert choice.Cs == (10.0, 0.1, 100.0, 1.0)


def test_the_mean_over_the_folds_chooses_not_one_fold():
    # C = 1 wins one fold by a little and loses the other by a lot
    scores = {(0.1, 0): 0.5, (0.1, 1): 0.5, (1.0, 0): 0.6, (1.0, 1): 0.0}

    def fit_score(C, train, validation):
        return scores[C, int(validation[0] >= 2)]

    choice = choose_C(fit_score, [0.1, 1.0], KFold(2), np.arange(4))
    assert choice.C == 0.1
    assert choice.mean_scores["score"].tolist() == [0.5, 0.3]


def test_groups_are_never_split_and_every_row_is_validated_once():
    rng = np.random.default_rng(0)
    groups = rng.integers(0, 9, size=60)
    seen = []

    def fit_score(C, train, validation):
        assert not set(groups[train]) & set(groups[validation])
        seen.append(validation)
        return 0.0

    choose_C(fit_score, [1.0], GroupKFold(3), np.zeros((60, 1)), groups=groups)
    assert sorted(np.concatenate(seen).tolist()) == list(range(60))


def test_a_splitter_that_splits_a_group_is_refused():
    groups = np.repeat(np.arange(3), 4)
    halves = [(np.arange(6), np.arange(6, 12))]
    with pytest.raises(ValueError, match=r"^split 0 puts group 1 on both sides: .*GroupKFold"):
        choose_C(by_C({1.0: 0.0}), [1.0], halves, groups=groups)


def test_a_holdout_is_one_given_split():
    calls = []

    def fit_score(C, train, validation):
        calls.append((C, train.tolist(), validation.tolist()))
        return {0.1: 0.4, 1.0: 0.4}[C]

    choice = choose_C(fit_score, [1.0, 0.1], [([0, 2, 3], [1, 4])])
    assert choice.C == 0.1
    assert calls == [(1.0, [0, 2, 3], [1, 4]), (0.1, [0, 2, 3], [1, 4])]


def test_several_metrics_and_select():
    def fit_score(C, train, validation):
        return {"ap": 1.0 / C, "ndcg": C}

    choice = choose_C(fit_score, [1.0, 2.0], KFold(2), np.ones(4), select="ndcg")
    assert choice.C == 2.0 and choice.selected_by == "ndcg"
    assert choice.mean_scores["ap"].tolist() == [1.0, 0.5]
    with pytest.raises(ValueError, match=r"^fit_score returns the metrics \['ap', 'ndcg'\]"):
        choose_C(fit_score, [1.0, 2.0], KFold(2), np.ones(4))
    with pytest.raises(ValueError, match=r"^select='map' is not among the metrics"):
        choose_C(fit_score, [1.0, 2.0], KFold(2), np.ones(4), select="map")


def test_an_empty_grid_is_refused_in_one_line():
    with pytest.raises(ValueError, match=r"^Cs is empty: give at least one candidate C$"):
        choose_C(by_C({}), [], KFold(2), np.ones(4))


@pytest.mark.parametrize("Cs", [[0.0], [-1.0], [np.inf], [np.nan], ["1"], [True], [1.0, 1]])
def test_bad_candidates_are_refused(Cs):
    with pytest.raises(
        ValueError, match=r"^(every candidate C must be|Cs holds a candidate twice)"
    ):
        choose_C(by_C({}), Cs, KFold(2), np.ones(4))


def test_no_split_or_a_nan_score_is_refused():
    with pytest.raises(ValueError, match=r"^cv gives no split$"):
        choose_C(by_C({1.0: 0.0}), [1.0], [])
    with pytest.raises(ValueError, match=r"^a splitter needs the rows X to split$"):
        choose_C(by_C({1.0: 0.0}), [1.0], KFold(2))
    with pytest.raises(ValueError, match=r"^the mean validation score of C=2.0 is NaN$"):
        choose_C(by_C({1.0: 0.0, 2.0: np.nan}), [1.0, 2.0], KFold(2), np.ones(4))


def test_an_estimator_gets_the_choice_and_scores_of_grid_search():
    X, y = make_classification(n_samples=120, n_features=6, flip_y=0.3, random_state=0)
    model = LogisticRegression()
    grid = [0.001, 0.01, 0.1, 1.0]
    folds = StratifiedKFold(4, shuffle=True, random_state=0)
    scorer = make_scorer(roc_auc_score, response_method="decision_function")
    choice = choose_C(estimator_fit_score(model, X, y, scorer), grid, folds, X, y)
    search = GridSearchCV(model, {"C": grid}, scoring=scorer, cv=folds).fit(X, y)
    assert search.best_params_["C"] == choice.C
    assert choice.mean_scores["score"].tolist() == search.cv_results_["mean_test_score"].tolist()
    both = estimator_fit_score(model, X, y, {"auc": scorer, "ap": "average_precision"})
    several = choose_C(both, grid, folds, X, y, select="auc")
    assert several.fold_scores["auc"].tolist() == choice.fold_scores["score"].tolist()
