"""`qsrank train`, `qsrank compare` and `qsrank config`: run an experiment that a config
names, and show the keys its config may give; `qsrank publish` copies a finished run into
results/, and `qsrank readme` rewrites the README's table from there."""

from pathlib import Path

import click

from qsrank.common import ConfigPath, default_config, notice_compiles, user_errors
from qsrank.pipelines import _registry

SOLVER_NAMES = ("cutting_plane", "frank_wolfe", "subgradient")  # qs.ssvm.SOLVERS


@click.command()
@click.option(
    "--config",
    "config_path",
    required=True,
    type=ConfigPath(),
    help="YAML config, or the name of a default config (e.g. digits, "
    "voc2011_actions); its key `experiment` names the pipeline.",
)
@click.option(
    "--class",
    "classes",
    multiple=True,
    help="Train only this class (repeatable) [voc2011_actions, voc2007_detection].",
)
@click.option(
    "--loss", type=click.Choice(["01", "ap", "ndcg"]), help="Train only the methods of this loss."
)
@click.option("--inference", help="Train only the methods of this LAI method (e.g. qs, yue).")
@click.option("--solver", type=click.Choice(SOLVER_NAMES), help="Structured SVM solver.")
@click.option(
    "--out",
    type=click.Path(file_okay=False, path_type=Path),
    help="Run directory; an existing one resumes [default: runs/<experiment>/<run-id>].",
)
@click.option(
    "--force", is_flag=True, default=None, help="Retrain what the run directory already holds."
)
@click.option(
    "--scheduler",
    metavar="ADDRESS",
    help="Dask scheduler that scores box stores read out of core: the address of "
    "a dask.distributed scheduler (tcp://HOST:8786), or threads, sync, "
    "processes [config: Dask's threaded scheduler] [voc2007_detection].",
)
@click.option(
    "--set",
    "sets",
    multiple=True,
    metavar="KEY=VALUE",
    help="Override a config key (dotted path, e.g. C.ap=10 or cv.folds=3; the value "
    "read as YAML); repeatable; recorded in the run's provenance.",
)
def train(config_path, classes, loss, inference, solver, out, force, scheduler, sets):
    """Run the experiment a config names: train, evaluate, write its tables.

    `qsrank config show EXPERIMENT` lists the keys a config (or --set) may give.
    """
    from qsrank.pipelines import _runner, _schema

    overrides = {
        "classes": list(classes) or None,
        "loss": loss,
        "inference": inference,
        "solver": solver,
        "force": force,
        "scheduler": scheduler,
    }
    notice_compiles()
    with user_errors():
        module = pipeline_of(config_path)
        spec = module.SPEC
        if scheduler is not None and "scheduler" not in _schema.keys(spec.schema):
            raise ValueError(
                f"--scheduler applies to experiments that read box stores "
                f"(voc2007_detection), not to {module.__name__.split('.')[-1]}"
            )
        given = {k: v for k, v in overrides.items() if v is not None}
        config = _runner.load_config(spec, config_path, _schema.parse_sets(sets), **given)
        run_dir = _runner.run(spec, config, out, progress=True, overrides=sets)
    click.echo(run_summary(module, run_dir))
    click.echo(f"results: {run_dir}")


@click.command()
@click.option(
    "--config",
    "config_path",
    type=ConfigPath(),
    help="YAML config of the comparison, or a default config's name [default: compare].",
)
@click.option(
    "--out",
    type=click.Path(file_okay=False, path_type=Path),
    help="Run directory; an existing one resumes [default: runs/compare/<run-id>].",
)
@click.option(
    "--force", is_flag=True, default=None, help="Retrain what the run directory already holds."
)
@click.option(
    "--set",
    "sets",
    multiple=True,
    metavar="KEY=VALUE",
    help="Override a config key (dotted path, e.g. device=cuda or seeds=[0]; the "
    "value read as YAML); repeatable; recorded in the run's provenance.",
)
def compare(config_path, out, force, sets):
    """Train every method for AP/NDCG with the same model, data, budget and seeds; print one
    table per data set (classification: test AP, NDCG, recall at precision 0.9, AUCPR;
    retrieval on held-out classes: mAP@R, Recall@1/4; times)."""
    from qsrank.pipelines import _runner, _schema
    from qsrank.pipelines.compare import SPEC

    if config_path is None:
        config_path = default_config("compare")
    notice_compiles()
    with user_errors():
        config = _runner.load_config(SPEC, config_path, _schema.parse_sets(sets), force=force)
        run_dir = _runner.run(SPEC, config, out, progress=True, overrides=sets)
    click.echo(_runner.report(SPEC, run_dir))
    click.echo(f"results: {run_dir}")


def experiments():
    """The experiments a config's `experiment` key may name."""
    return list(_registry.EXPERIMENTS)


@click.group()
def config():
    """The keys of the experiments' configs."""


@config.command("show")
@click.argument("experiment", type=click.Choice(_registry.EXPERIMENTS))
def config_show(experiment):
    """Print EXPERIMENT's config keys with their defaults and one line of help each, as YAML
    a config can start from."""
    from qsrank.pipelines import _schema

    with user_errors():
        model = _registry.schema(experiment)
    click.echo("\n".join(_schema.help_lines(model)))


@config.command("check")
@click.argument("config_path", metavar="CONFIG", type=ConfigPath())
def config_check(config_path):
    """Read CONFIG (a YAML file, or a default config's name) as `qsrank train` would and print
    it resolved, every key with its value, without running it."""
    from qsrank.pipelines import _runner
    from qsrank.pipelines._config import dump_config

    with user_errors():
        module = pipeline_of(config_path)
        click.echo(dump_config(_runner.load_config(module.SPEC, config_path)), nl=False)


def pipeline_of(config_path):
    """The module pipelines.<experiment> named by the config's top-level `experiment` key."""
    from qsrank.pipelines._yaml import read_config

    try:
        config = read_config(config_path)
    except OSError as err:
        raise ValueError(f"cannot read config {config_path}: {err}") from None
    except ValueError as err:
        raise ValueError(f"config {config_path}: {err}") from None
    name = config.get("experiment") if isinstance(config, dict) else None
    known = experiments()
    if name is None:
        raise ValueError(
            f"config {config_path} has no top-level key `experiment` naming its "
            f"pipeline; one of: {', '.join(known)}"
        )
    if name not in known:
        raise ValueError(
            f"config {config_path}: unknown experiment {name!r}; known: {', '.join(known)}"
        )
    return _registry.experiment(name)


def run_summary(module, run_dir):
    """What `qsrank train` prints: the pipeline's own report(run_dir), else the report files
    its declaration names."""
    from qsrank.pipelines import _runner

    if hasattr(module, "report"):
        return module.report(run_dir)
    return _runner.report(module.SPEC, run_dir)


@click.command(hidden=True)
@click.option(
    "--readme",
    type=click.Path(dir_okay=False, path_type=Path),
    default=Path("README.md"),
    show_default=True,
)
@click.option(
    "--results",
    type=click.Path(file_okay=False, path_type=Path),
    default=Path("results"),
    show_default=True,
)
def readme(readme, results):
    """Rewrite the README's headline table from the committed result files (`make readme`)."""
    from qsrank.pipelines import headline

    with user_errors():
        click.echo(headline.write_readme(readme, results))


@click.command()
@click.argument("run", type=click.Path(file_okay=False, path_type=Path))
@click.option(
    "--to",
    type=click.Path(file_okay=False, path_type=Path),
    help="Where to publish [default: results/<experiment>/<RUN's name>].",
)
def publish(run, to):
    """Copy the finished run RUN's tables, figures and provenance into results/ (kept in git;
    the docs and the README read them); `make readme` then updates the README's table."""
    from qsrank.pipelines.publish import publish as publish_run

    with user_errors():
        to, names = publish_run(run, to)
    click.echo(f"published {len(names)} files of {run} into {to}")
