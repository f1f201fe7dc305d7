"""`qsrank`, the command line of the suite: each command parses, calls one pipeline, prints."""

import importlib
import os
import sys
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

import click

from pipelines import _registry

# The pipelines, qs and numba load only inside a command: `qsrank --help` imports none of them.
# So the choices of the options are written here; tests/test_cli.py checks them against their
# sources (pipelines.scaling, qs.ssvm.SOLVERS).
VARIES = ("negatives", "positives", "total", "share")
BENCH_LOSSES = ("ap", "ndcg")
CURVE_NAMES = ("0-1", "ap", "ap_qs", "ap_search", "ap_auto", "ap_auto_out", "sort_dc", "ndcg",
               "ndcg_qs", "ndcg_auto", "ndcg_auto_out", "np.max", "np.partition", "np.sort",
               "ap_batch", "ap_bucket", "ap_bucket_sort", "ndcg_batch", "ndcg_bucket",
               "ndcg_bucket_sort")
SOLVER_NAMES = ("cutting_plane", "frank_wolfe", "subgradient")
SORTER_KINDS = ("lstm", "cnn")  # qs.surrogates.sodeep.KINDS
SORTER_LENGTH = 64  # qs.surrogates.sodeep.DEFAULT_LENGTH

# The repository's configs; when the package is installed without them, the built-in defaults.
CONFIGS = Path(__file__).resolve().parents[1] / "configs"
DEFAULT_CONFIG = CONFIGS / "scaling.yaml"
# `qsrank bench --experiment NAME`: the pipelines that time LAI inside training (Figures 2-3)
BENCH_EXPERIMENTS = ("voc2011_actions",)


# What a run can hit that is the user's to fix (bad config or data, an unwritable --out, a
# QP backend that fails or is missing): a one-line message and exit 1, not a traceback.
USER_ERRORS = (ValueError, OSError, RuntimeError, ImportError)

def _version():
    try:
        return version("qsrank")
    except PackageNotFoundError:  # run from a source tree that was never installed
        return "unknown"


_notice = {"registered": False, "shown": False, "depth": 0, "start": 0.0, "seconds": 0.0}


def notice_compiles():
    """From now on, print one line on stderr before the first kernel numba compiles (a cache
    miss: the first run after installing or updating the kernels), and at exit how long the
    compilations took (kernels compiled inside others counted once); cache loads are
    silent."""
    if _notice["registered"]:
        return
    import atexit
    import time

    from numba.core import event

    class CompileNotice(event.Listener):
        def on_start(self, _):
            if not _notice["shown"]:
                _notice["shown"] = True
                click.echo("compiling kernels (first run only) ...", err=True)
            if _notice["depth"] == 0:
                _notice["start"] = time.perf_counter()
            _notice["depth"] += 1

        def on_end(self, _):
            _notice["depth"] -= 1
            if _notice["depth"] == 0:
                _notice["seconds"] += time.perf_counter() - _notice["start"]

    event.register("numba:compile", CompileNotice())
    atexit.register(_report_compiles)
    _notice["registered"] = True


def _report_compiles():
    if _notice["seconds"] > 0:
        click.echo(f"compiled kernels for {_notice['seconds']:.1f} s", err=True)


@click.group()
@click.version_option(_version(), prog_name="qsrank")
@click.pass_context
def main(ctx):
    """Exact loss-augmented inference for AP and NDCG losses (Mohapatra et al., CVPR 2018)."""
    ctx.call_on_close(_release_run_dirs)


def _release_run_dirs():
    """After a command: release the run directories it claimed (if it loaded the pipelines)."""
    runs = sys.modules.get("pipelines._runs")
    if runs is not None:
        runs.release_run_dirs()


@main.command()
@click.option("--vary", type=click.Choice(VARIES),
              help="Which count grows [config: negatives]; share: a grid of negatives x share "
                   "of positives, every exact method and the 0-1 LAI.")
@click.option("--loss", type=click.Choice(BENCH_LOSSES + ("all",)),
              help="Losses to time [config: all].")
@click.option("--methods",
              help=f"Comma-separated curves to time, from: {', '.join(CURVE_NAMES)}.")
@click.option("--repeats", type=click.IntRange(min=1),
              help="Warm timed samples per size and curve (with --experiment: trainings).")
@click.option("--preset", help="Size preset of the config: paper, large, voc or quick.")
@click.option("--config", "config_path",
              type=click.Path(exists=True, dir_okay=False, path_type=Path),
              help="YAML config [default: configs/scaling.yaml].")
@click.option("--out", type=click.Path(file_okay=False, path_type=Path),
              help="Run directory [default: results/scaling/<run-id>].")
@click.option("--seed", type=click.IntRange(min=0), help="Seed of the synthetic scores.")
@click.option("--budget", type=click.FloatRange(min=0, min_open=True),
              help="Skip a curve once a call is predicted to take longer (seconds).")
@click.option("--experiment", type=click.Choice(BENCH_EXPERIMENTS),
              help="Time the total LAI time of whole trainings on this experiment's data "
                   "instead of single calls on synthetic scores [config: "
                   "configs/<experiment>.yaml].")
@click.option("--class", "action", help="Action class of --experiment [config: phoning]; with "
              "--replay, comma-separated classes [phoning].")
@click.option("--replay", is_flag=True,
              help="Record the score vectors of cutting-plane trainings on the VOC2011 action "
                   "data (--config: a voc2011_actions config) and time every exact method on "
                   "them, call by call (--repeats rounds [5], --loss).")
@click.option("--clock", type=click.Choice(["wall", "cpu"]),
              help="Time by the wall clock, or by the process's CPU time on a machine shared "
                   "with other jobs [config: wall].")
@click.option("--torch-losses", is_flag=True,
              help="Time the rank losses of qs.torch against the surrogates (forward + "
                   "backward, peak memory, distributed, memory bank; --repeats [5]).")
def bench(config_path, out, methods, budget, experiment, action, replay, clock, torch_losses,
          **options):
    """Time LAI methods as the sample counts grow (paper 000, Figures 2-3).

    Without --experiment: single LAI calls on synthetic scores. With --experiment
    voc2011_actions: whole trainings on the boxes of one class (--class), subsampled;
    rerunning into the same --out resumes, and the figure shows every vary run there.
    """
    notice_compiles()
    if torch_losses:
        _bench_torch_losses(out, options["repeats"])
        return
    if replay:
        _bench_replay(config_path, out, action, options["loss"], options["repeats"])
        return
    if experiment is not None:
        module = importlib.import_module(f"pipelines.{experiment}")
        _bench_experiment(module, config_path, out, methods, budget, action, **options)
        return
    if action is not None:
        raise click.UsageError("--class needs --experiment.")
    from pipelines import scaling

    if config_path is None and DEFAULT_CONFIG.is_file():
        config_path = DEFAULT_CONFIG
    methods = [name.strip() for name in methods.split(",")] if methods else None
    config = None
    try:
        config = scaling.load_config(config_path, methods=methods, budget_s=budget, clock=clock,
                                     **options)
        run_dir = scaling.run(config, out)
    except USER_ERRORS as err:
        raise click.ClickException(str(err)) from None
    except MemoryError:  # beyond the up-front check (memory that others hold)
        if config is None:
            raise click.ClickException("out of memory reading the config") from None
        preset, vary = config["preset"], config["vary"]
        sizes = config["presets"][preset][vary]
        stop = f" (stop {sizes['stop']})" if "stop" in sizes else ""
        raise click.ClickException(
            f"out of memory timing the sizes of presets.{preset}.{vary}{stop}; lower its "
            f"{'stop' if stop else 'sizes'}") from None
    click.echo(scaling.report(run_dir))
    click.echo(f"\nresults: {run_dir}")


def _bench_torch_losses(out, repeats):
    from pipelines import torch_loss_bench

    try:
        run_dir, report = torch_loss_bench.run(out, repeats=repeats or 5)
    except USER_ERRORS as err:
        raise click.ClickException(str(err)) from None
    click.echo(report)
    click.echo(f"results: {run_dir}")


def _bench_replay(config_path, out, action, loss, repeats):
    from pipelines import replay, voc2011_actions

    if config_path is None:
        default = CONFIGS / "voc2011_actions.yaml"
        config_path = default if default.is_file() else None
    classes = [c.strip() for c in action.split(",")] if action else ["phoning"]
    losses = list(BENCH_LOSSES) if loss in (None, "all") else [loss]
    try:
        config = voc2011_actions.load_config(config_path, classes=classes)
        run_dir = replay.run(config, classes, losses, repeats or 5, out)
    except USER_ERRORS as err:
        raise click.ClickException(str(err)) from None
    click.echo(replay.read_summary(run_dir))
    click.echo(f"results: {run_dir}")


def _bench_experiment(module, config_path, out, methods, budget, action, *, vary, loss,
                      repeats, preset, seed):
    if budget is not None:
        raise click.UsageError("--budget applies to the synthetic-score benchmark only, not "
                               "with --experiment.")
    if config_path is None:
        default = CONFIGS / f"{module.EXPERIMENT}.yaml"
        config_path = default if default.is_file() else None
    methods = [name.strip() for name in methods.split(",")] if methods else None
    figures = {"vary": vary, "loss": loss, "methods": methods, "repeats": repeats,
               "preset": preset, "class": action}
    try:
        config = module.load_config(config_path, seed=seed, figures=figures)
        run_dir = module.figure_run(config, out)
    except USER_ERRORS as err:
        raise click.ClickException(str(err)) from None
    click.echo(module.report(run_dir))
    click.echo(f"results: {run_dir}")


@main.command()
@click.option("--config", "config_path", required=True,
              type=click.Path(exists=True, dir_okay=False, path_type=Path),
              help="YAML config; its key `experiment` names the pipeline "
                   "(e.g. configs/voc2011_actions.yaml, configs/digits.yaml).")
@click.option("--class", "classes", multiple=True,
              help="Train only this class (repeatable) [voc2011_actions, voc2007_detection].")
@click.option("--loss", type=click.Choice(["01", "ap", "ndcg"]),
              help="Train only the methods of this loss.")
@click.option("--inference", help="Train only the methods of this LAI method (e.g. qs, yue).")
@click.option("--solver", type=click.Choice(SOLVER_NAMES), help="Structured SVM solver.")
@click.option("--out", type=click.Path(file_okay=False, path_type=Path),
              help="Run directory; an existing one resumes [default: "
                   "results/<experiment>/<run-id>].")
@click.option("--force", is_flag=True, default=None,
              help="Retrain what the run directory already holds.")
@click.option("--scheduler", metavar="ADDRESS",
              help="Dask scheduler that scores box stores read out of core: the address of "
                   "a dask.distributed scheduler (tcp://HOST:8786), or threads, sync, "
                   "processes [config: Dask's threaded scheduler] [voc2007_detection].")
@click.option("--set", "sets", multiple=True, metavar="KEY=VALUE",
              help="Override a config key (dotted path, e.g. C.ap=10 or cv.folds=3; the value "
                   "read as YAML); repeatable; recorded in the run's provenance.")
def train(config_path, classes, loss, inference, solver, out, force, scheduler, sets):
    """Run the experiment a config names: train, evaluate, write its tables.

    `qsrank config show EXPERIMENT` lists the keys a config (or --set) may give.
    """
    from pipelines import _runner, _schema

    overrides = {"classes": list(classes) or None, "loss": loss, "inference": inference,
                 "solver": solver, "force": force, "scheduler": scheduler}
    notice_compiles()
    try:
        module = pipeline_of(config_path)
        spec = getattr(module, "SPEC", None)
        keys = _schema.keys(spec.schema) if spec else getattr(module, "DEFAULTS", {})
        if scheduler is not None and "scheduler" not in keys:
            raise ValueError(f"--scheduler applies to experiments that read box stores "
                             f"(voc2007_detection), not to {module.__name__.split('.')[-1]}")
        given = {k: v for k, v in overrides.items() if v is not None}
        if spec is not None:
            config = _runner.load_config(spec, config_path, _schema.parse_sets(sets), **given)
            run_dir = _runner.run(spec, config, out, progress=True, overrides=sets)
        else:
            config = module.load_config(config_path, sets=_schema.parse_sets(sets), **given)
            run_dir = module.run(config, out, progress=True, overrides=sets)
    except USER_ERRORS as err:
        raise click.ClickException(str(err)) from None
    click.echo(run_summary(module, run_dir))
    click.echo(f"results: {run_dir}")


@main.command()
@click.option("--config", "config_path",
              type=click.Path(exists=True, dir_okay=False, path_type=Path),
              help="YAML config of the comparison [default: configs/compare.yaml].")
@click.option("--out", type=click.Path(file_okay=False, path_type=Path),
              help="Run directory; an existing one resumes [default: "
                   "results/compare/<run-id>].")
@click.option("--force", is_flag=True, default=None,
              help="Retrain what the run directory already holds.")
def compare(config_path, out, force):
    """Train every method for AP/NDCG with the same model, data, budget and seeds; print one
    table per data set (test AP, NDCG, recall at precision 0.9, AUCPR, times)."""
    from pipelines import compare as pipeline

    if config_path is None and (CONFIGS / "compare.yaml").is_file():
        config_path = CONFIGS / "compare.yaml"
    notice_compiles()
    try:
        config = pipeline.load_config(config_path, force=force)
        run_dir = pipeline.run(config, out, progress=True)
    except USER_ERRORS as err:
        raise click.ClickException(str(err)) from None
    click.echo(pipeline.report(run_dir))
    click.echo(f"results: {run_dir}")


def experiments():
    """The experiments a config's `experiment` key may name."""
    return list(_registry.EXPERIMENTS)


@main.group()
def config():
    """The keys of the experiments' configs."""


@config.command("show")
@click.argument("experiment", type=click.Choice(_registry.EXPERIMENTS))
def config_show(experiment):
    """Print EXPERIMENT's config keys with their defaults and one line of help each, as YAML
    a config can start from."""
    from pipelines import _schema

    try:
        model = _registry.schema(experiment)
    except USER_ERRORS as err:
        raise click.ClickException(str(err)) from None
    click.echo("\n".join(_schema.help_lines(model)))


def pipeline_of(config_path):
    """The module pipelines.<experiment> named by the config's top-level `experiment` key."""
    from pipelines._yaml import read_config

    try:
        config = read_config(config_path)
    except OSError as err:
        raise ValueError(f"cannot read config {config_path}: {err}") from None
    except ValueError as err:
        raise ValueError(f"config {config_path}: {err}") from None
    name = config.get("experiment") if isinstance(config, dict) else None
    known = experiments()
    if name is None:
        raise ValueError(f"config {config_path} has no top-level key `experiment` naming its "
                         f"pipeline; one of: {', '.join(known)}")
    if name not in known:
        raise ValueError(f"config {config_path}: unknown experiment {name!r}; known: "
                         f"{', '.join(known)}")
    return _registry.experiment(name)


def run_summary(module, run_dir):
    """What `qsrank train` prints: the pipeline's report(run_dir), else the run's summary.md."""
    if hasattr(module, "report"):
        return module.report(run_dir)
    summary = Path(run_dir) / "summary.md"
    return summary.read_text(encoding="utf-8") if summary.is_file() else ""


@main.command(hidden=True)
@click.option("--readme", type=click.Path(dir_okay=False, path_type=Path),
              default=CONFIGS.parent / "README.md", show_default=True)
@click.option("--results", type=click.Path(file_okay=False, path_type=Path),
              default=CONFIGS.parent / "results", show_default=True)
def readme(readme, results):
    """Rewrite the README's headline table from the committed result files (`make readme`)."""
    from pipelines import headline

    try:
        click.echo(headline.write_readme(readme, results))
    except USER_ERRORS as err:
        raise click.ClickException(str(err)) from None


@main.group()
def plot():
    """Redraw the figure of a finished run."""


@plot.command("scaling")
@click.argument("run_dir", type=click.Path(exists=True, file_okay=False, path_type=Path))
def plot_scaling(run_dir):
    """Redraw RUN_DIR/scaling.png and scaling.pdf from RUN_DIR/timings.csv."""
    from pipelines import scaling

    try:
        paths = scaling.plot_run(run_dir)
    except USER_ERRORS as err:
        raise click.ClickException(str(err)) from None
    click.echo("\n".join(map(str, paths)))


@main.group()
def sodeep():
    """SoDeep's learned sorters (paper 003): train one, or compare their rank error."""


@sodeep.command("train")
@click.option("--kind", type=click.Choice(SORTER_KINDS), default="lstm", show_default=True,
              help="Bidirectional LSTM or 1-D CNN sorter.")
@click.option("--length", type=click.IntRange(min=2), default=SORTER_LENGTH, show_default=True,
              help="Length of the score vectors it ranks.")
@click.option("--steps", type=click.IntRange(min=1), default=2000, show_default=True,
              help="Adam steps, each on a fresh batch of synthetic vectors.")
@click.option("--seed", type=click.IntRange(min=0), default=0, show_default=True)
@click.option("--size", type=click.Choice(["default", "full"]), default="default",
              show_default=True, help="full: the paper's LSTM (hidden 512).")
@click.option("--hidden", type=click.IntRange(min=1), help="LSTM hidden units (overrides --size).")
@click.option("--batch-size", type=click.IntRange(min=1), default=128, show_default=True)
@click.option("--lr", type=click.FloatRange(min=0, min_open=True),
              help="Adam's learning rate [lstm 1e-2, cnn 1e-3]; halves every quarter of "
                   "--steps.")
@click.option("--test-vectors", type=click.IntRange(min=0), default=10_000, show_default=True,
              help="Synthetic test vectors of the recorded L1 error (0: none).")
@click.option("--out", required=True, type=click.Path(dir_okay=False, path_type=Path),
              help="Checkpoint file to write.")
def sodeep_train(kind, length, steps, seed, size, hidden, batch_size, lr, test_vectors, out):
    """Train a sorter on synthetic score vectors (L1 loss on the ranks) and save it."""
    from pipelines import sodeep as pipeline

    try:
        meta = pipeline.train(kind, length, steps, seed, out, size=size, batch_size=batch_size,
                              lr=lr, test_vectors=test_vectors, hidden=hidden)
    except USER_ERRORS as err:
        raise click.ClickException(str(err)) from None
    click.echo(pipeline.train_report(meta, out))


@sodeep.command("eval")
@click.option("--checkpoint", "checkpoints", multiple=True,
              type=click.Path(exists=True, dir_okay=False, path_type=Path),
              help="A sorter checkpoint (repeatable) [default: the shipped LSTM and CNN].")
@click.option("--vectors", type=click.IntRange(min=1), default=10_000, show_default=True,
              help="Synthetic test vectors.")
def sodeep_eval(checkpoints, vectors):
    """L1 rank error of the sorters and the handcrafted ranker, beside the paper's Table 1."""
    from pipelines import sodeep as pipeline

    try:
        rows = pipeline.evaluate(list(checkpoints), vectors)
    except USER_ERRORS as err:
        raise click.ClickException(str(err)) from None
    click.echo(pipeline.eval_table(rows, vectors))


@main.group()
def load():
    """Validate a data set, summarise it and cache it."""


@load.command("poselet")
@click.argument("path", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option("--features-dir", type=click.Path(exists=True, file_okay=False, path_type=Path),
              help="Where the NAME_ID.feature files are [default: beside PATH].")
@click.option("--out", type=click.Path(dir_okay=False, path_type=Path),
              help="Write the validated data to this .npz cache.")
def load_poselet(path, features_dir, out):
    """Read the VOC2011 action poselet list file PATH and its feature files."""
    from pipelines._io import write_npz
    from qs import data

    try:
        poselet = data.load_poselet(path, feature_dir=features_dir)
        if out is not None:
            write_npz(out, data.cache_arrays(poselet))
    except USER_ERRORS as err:
        raise click.ClickException(str(err)) from None
    click.echo(poselet_summary(poselet))
    if out is not None:
        click.echo(f"cache: {out}")


@load.command("cnn")
@click.argument("source", nargs=-1, required=True)
@click.option("--out", required=True, type=click.Path(path_type=Path),
              help="The store to write (a directory; never overwritten; an unfinished "
                   "OUT.partial resumes).")
@click.option("--dtype", type=click.Choice(["float16", "float32"]), default="float16",
              show_default=True, help="Storage type of the features.")
@click.option("--workers", type=click.IntRange(min=1), default=min(4, os.cpu_count() or 1),
              show_default=True, help="Processes reading the input files.")
@click.option("--chunk-images", type=click.IntRange(min=1),
              help="Images per chunk [default: about 64 MiB of features].")
@click.option("--features-dir", type=click.Path(exists=True, file_okay=False, path_type=Path),
              help="List file: where the STEM_id.feature files are [default: beside it].")
@click.option("--features", "n_features", type=click.IntRange(min=1),
              help="Feature dimension (list file: required; synthetic: [64]).")
@click.option("--layout", type=click.Choice(["pooled", "unpooled"]),
              help="List file: the released reader's layout, pooled (also test files) or "
                   "unpooled (is_fs label STEM n_boxes per image) [default: pooled].")
@click.option("--annotations", type=click.Path(exists=True, file_okay=False, path_type=Path),
              help="Directory of VOC annotation XML files (ID.xml): objects, difficult flags, "
                   "image sizes.")
@click.option("--image-set", type=click.Path(exists=True, dir_okay=False, path_type=Path),
              help="R-CNN caches: a VOC image-set list naming the images (ID.mat in SOURCE).")
@click.option("--split", help="Split name stored with the data [synthetic: trainval; "
              "image set: its file name].")
@click.option("--scale", type=click.FloatRange(0, 1, min_open=True), default=0.05,
              show_default=True, help="Synthetic: fraction of VOC2007's image count.")
@click.option("--seed", type=click.IntRange(min=0), default=0, show_default=True,
              help="Synthetic: the seed.")
@click.option("--boxes", type=click.IntRange(min=2), default=40, show_default=True,
              help="Synthetic: boxes per image.")
def load_cnn(source, out, dtype, workers, chunk_images, split, **options):
    """Convert box features into a chunked store at OUT.

    SOURCE: a latent AP-SVM list file (with --features, optionally --features-dir), a
    directory or list of R-CNN .mat caches (optionally --annotations, --image-set), or
    `synthetic` (--scale, --seed, --boxes, --features).
    """
    from qs.data import convert, open_store

    try:
        src = cnn_source(source, dtype, split, **options)
        stats = {}
        path = convert.convert(src, out, chunk_images=chunk_images, workers=workers,
                               split=split, progress=True, stats=stats)
        click.echo(f"{store_summary(open_store(path))}   written: {stats['blocks_written']} "
                   f"chunks ({stats['blocks_resumed']} resumed) in {stats['total_s']:.1f} s")
    except (*USER_ERRORS, MemoryError) as err:
        raise click.ClickException(" ".join(str(err).split()) or "out of memory") from None


@load.command("verify")
@click.argument("store", type=click.Path(path_type=Path))
def load_verify(store):
    """Check every chunk of the box store STORE against its recorded checksum; exit 1 and
    name the chunks when some are missing or changed."""
    from qs.data import open_store

    try:
        n = open_store(store).verify(progress=True)
    except USER_ERRORS as err:
        raise click.ClickException(" ".join(str(err).split())) from None
    click.echo(f"{store}: all {n} chunks match their checksums")


def cnn_source(source, dtype, split, *, n_features, features_dir, layout, annotations, image_set,
               scale, seed, boxes):
    """The `qs.data.convert` source that `qsrank load cnn SOURCE` names."""
    from qs.data import convert
    from qs.data.voc2007 import SyntheticVOC2007

    given = {"--features-dir": features_dir, "--layout": layout, "--annotations": annotations,
             "--image-set": image_set}
    if source == ("synthetic",):
        extra = [k for k, v in given.items() if v is not None]
        if extra:
            raise click.UsageError(f"{', '.join(extra)} do not apply to synthetic data.")
        gen = SyntheticVOC2007(seed, scale, boxes, n_features or 64)
        return convert.SyntheticSource(gen, split or "trainval", dtype)
    paths = [Path(s) for s in source]
    missing = [str(p) for p in paths if not p.exists()]
    if missing:
        raise ValueError(f"No such file or directory: {', '.join(missing)}.")
    if len(paths) == 1 and not paths[0].is_dir() and paths[0].suffix.lower() != ".mat":
        if image_set is not None:
            raise click.UsageError("--image-set applies to R-CNN .mat caches, not a list file.")
        return convert.LatentListSource(paths[0], n_features, dtype, layout=layout or "pooled",
                                        feature_dir=features_dir, annotations=annotations)
    for option in ("--features-dir", "--layout"):
        if given[option] is not None:
            raise click.UsageError(f"{option} applies to a latent list file.")
    if len(paths) > 1 and any(p.is_dir() or p.suffix.lower() != ".mat" for p in paths):
        raise click.UsageError("Several SOURCE paths must all be .mat files.")
    return convert.RcnnSource(paths[0] if len(paths) == 1 and paths[0].is_dir() else paths,
                              dtype, annotations=annotations, image_set=image_set)


def store_summary(store):
    """One line: the store, its size, shape and source."""
    size = sum(f.stat().st_size for f in Path(store.path).rglob("*") if f.is_file())
    return (f"store: {store.path}   images: {store.n_images}   boxes: "
            f"{int(store.counts[:].sum())}   K_max: {store.k_max}   d: {store.d}   "
            f"{store.dtype.name}   chunks of {store.chunk_images} images   {size:,} bytes   "
            f"source: {store.source}")


def poselet_summary(poselet):
    """Boxes, images, dimensions, positives per action, sparsity and source, as text."""
    from qs import data

    n_boxes, n_dims = poselet.X.shape
    labels = poselet.labels
    n_other = int(((labels < 0) | (labels > len(data.ACTIONS))).sum())
    lines = [
        (f"boxes: {n_boxes}   images: {poselet.n_images}   dimensions: {n_dims} "
         f"({'2404 features + bias' if poselet.bias else 'no bias'})"),
        (f"ignored (label 0): {int((labels == data.IGNORE).sum())}   other actions: {n_other}   "
         f"non-zeros: {poselet.X.nnz} ({poselet.X.nnz / max(n_boxes * n_dims, 1):.2%})"),
        "positives per action:",
    ]
    lines += [f"  {k:2d} {name:<18} {count}" for k, (name, count)
              in enumerate(poselet.positives_per_class().items(), start=1)]
    return "\n".join(lines + [f"source: {poselet.source}"])
