"""`qsrank fit`, `predict` and `evaluate`: a RankSVM on the user's own feature files, the
scores of a saved model, and the rank metrics of scores. The pipelines load inside the
commands, so `qsrank --help` imports none of them."""

from contextlib import contextmanager
from pathlib import Path

import click

from qsrank.common import notice_compiles, user_errors

FILE = click.Path(exists=True, dir_okay=False, path_type=Path)


@contextmanager
def label_errors():
    """`user_errors`, a table's missing or misnamed label column told with the option that
    names it."""
    from qs.data.tables import LabelColumnError

    with user_errors():
        try:
            yield
        except LabelColumnError as err:
            raise click.ClickException(
                err.describe("name its label column with --label-column")
            ) from None


def _grid(ctx, param, value):
    """--C 1 or --C 0.01,0.1,1: one C, or a grid that cross-validation chooses from."""
    if value is None:
        return None
    try:
        return [float(v) for v in value.split(",")]
    except ValueError:
        raise click.BadParameter(
            f"expected a number or comma-separated numbers; got {value[:60]!r}."
        ) from None


@click.command()
@click.argument("train", type=FILE)
@click.option(
    "--test",
    type=FILE,
    help="Test feature file [default: hold out --test-size of TRAIN, stratified].",
)
@click.option("--label-column", help="The label column of a CSV/TSV/Parquet file.")
@click.option(
    "--group-column", help="The query id column of a CSV/TSV/Parquet file: learn to rank per query."
)
@click.option(
    "--loss", type=click.Choice(["ap", "ndcg", "01"]), help="The loss RankSVM is trained for [ap]."
)
@click.option(
    "--C",
    "C",
    callback=_grid,
    help="RankSVM's C, or comma-separated values to "
    "choose from by k-fold CV [default: 0.1,1,10,100].",
)
@click.option(
    "--baseline-C",
    "baseline_C",
    callback=_grid,
    help="The same for LinearSVC and LogisticRegression [default: 0.001,0.01,0.1,1,10,100].",
)
@click.option("--cv-folds", type=click.IntRange(min=2), help="Stratified CV folds [5].")
@click.option(
    "--cv-metric",
    type=click.Choice(["ap", "ndcg", "roc_auc"]),
    help="The metric CV chooses C by [ap].",
)
@click.option(
    "--solver", help="RankSVM's solver: cutting_plane [default], frank_wolfe or subgradient."
)
@click.option(
    "--pos-label",
    help="The positive class [default: the larger of two classes; "
    "with more, every class one vs the rest].",
)
@click.option(
    "--scale",
    type=click.Choice(["standard", "none"]),
    help="Standardise the features on the training rows [standard].",
)
@click.option(
    "--zero-based/--one-based",
    "zero_based",
    default=None,
    help="The index base of svmlight files, for every file of the model [default: "
    "zero-based when the training file uses index 0, else one-based].",
)
@click.option(
    "--test-size",
    type=click.FloatRange(0, 1, min_open=True, max_open=True),
    help="Share of TRAIN held out without --test [0.25].",
)
@click.option("--seed", type=click.IntRange(min=0), help="Seed of the split and CV folds [0].")
@click.option(
    "--out",
    required=True,
    type=click.Path(file_okay=False, path_type=Path),
    help="Run directory: model, metrics, table, provenance; an existing one resumes.",
)
@click.option("--force", is_flag=True, default=None, help="Retrain the classes it holds.")
def fit(train, test, out, **options):
    """Train a RankSVM for the loss on TRAIN, one vs the rest per positive class, beside
    tuned LinearSVC and LogisticRegression baselines; print the test metrics.

    TRAIN and --test: CSV/TSV (with --label-column), Parquet, svmlight/libsvm, or .npz/.mat
    holding X and y.

    When the data name queries (svmlight `qid:`, --group-column, an .npz `groups` array) it
    learns to rank per query instead: the AP-SVM and NDCG-SVM over queries, the pairwise
    RankSVM, logistic regression, LightGBM and XGBoost, C by GroupKFold over the queries;
    it prints MAP, NDCG@1/5/10 and P@10 over the test queries and writes per_query.csv.
    """
    from qsrank.pipelines import _runner

    notice_compiles()
    with label_errors():
        if _names_queries(train, options["group_column"]):
            from qsrank.pipelines import ltr as pipeline

            config = _runner.load_config(
                pipeline.SPEC, None, None, **_ltr_options(train, test, options)
            )
        else:
            from qsrank.pipelines import fit as pipeline

            if options.pop("group_column") is not None:
                raise click.UsageError("--group-column applies to CSV/TSV/Parquet files.")
            config = _runner.load_config(
                pipeline.SPEC,
                None,
                None,
                train=str(train),
                test=None if test is None else str(test),
                **options,
            )
        run_dir = _runner.run(pipeline.SPEC, config, out, progress=True)
    click.echo(_runner.report(pipeline.SPEC, run_dir))
    click.echo(f"results: {run_dir}")


def _names_queries(train, group_column):
    """Whether TRAIN names queries: a group column given, a qid: or a groups array."""
    from qs.data.formats import names_queries
    from qs.data.tables import TABLE_KINDS

    if train.suffix.lower() in TABLE_KINDS:
        return group_column is not None
    return names_queries(train)


#: `qsrank fit`'s options that learning to rank per query has no use for
_NOT_PER_QUERY = ("loss", "baseline_C", "cv_metric", "solver", "pos_label", "scale")


def _ltr_options(train, test, options):
    """The ltr pipeline's keys from `qsrank fit`'s options; an option it has no use for is
    refused in one line."""
    unused = [name for name in _NOT_PER_QUERY if options[name] is not None]
    if unused:
        flag = "--" + unused[0].replace("_", "-")
        raise click.UsageError(
            f"{flag} does not apply when the data name queries: every "
            "method of learning to rank runs (docs/ltr.md)."
        )
    keys = ("label_column", "group_column", "C", "cv_folds", "test_size", "seed", "force")
    return {
        "datasets": ["files"],
        "train": str(train),
        "test": None if test is None else str(test),
        **{k: options[k] for k in keys},
    }


@click.command()
@click.argument("model", type=click.Path(exists=True, path_type=Path))
@click.argument("data", type=FILE)
@click.option(
    "--label-column",
    help="A column of a CSV/TSV/Parquet DATA to leave out [default: the model's label column].",
)
@click.option(
    "--out",
    required=True,
    type=click.Path(dir_okay=False, path_type=Path),
    help="The scores CSV to write: one column per positive class.",
)
def predict(model, data, label_column, out):
    """Score the rows of DATA with MODEL (a `qsrank fit` run directory or its model.json).

    DATA: the model's features in a file of the formats `qsrank fit` reads; its label
    column, if any, is left out.
    """
    from qsrank.pipelines.scoring import predict as score

    with label_errors():
        rows = score(model, data, out, label_column=label_column)
    click.echo(f"scores of {rows} rows: {out}")


@click.command()
@click.argument("scores", type=FILE)
@click.argument("labels", type=FILE)
@click.option("--label-column", help="The label column of a CSV/TSV/Parquet LABELS file.")
@click.option(
    "--out",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Also write the metrics to this CSV.",
)
def evaluate(scores, labels, label_column, out):
    """AP, NDCG, VOC AP and ROC AUC of each class's column of SCORES (as `qsrank predict`
    writes them) against the labels of LABELS, that class vs the rest."""
    from qsrank.pipelines._tables import frame_table
    from qsrank.pipelines.scoring import METRICS
    from qsrank.pipelines.scoring import evaluate as measure

    with label_errors():
        frame = measure(scores, labels, label_column=label_column, out=out)
    click.echo(frame_table(frame.rename(columns=METRICS), dict.fromkeys(METRICS.values(), ".4f")))
    if out is not None:
        click.echo(f"metrics: {out}")
