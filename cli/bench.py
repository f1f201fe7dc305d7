"""`qsrank bench`: the benchmarks. Without a subcommand it times LAI as the sample counts grow
(the scaling benchmark, with --replay or --experiment its variants inside training); each
other benchmark is a subcommand. `qsrank plot RUN_DIR` redraws the figures of a run."""

from pathlib import Path

import click

from qsrank.common import USER_ERRORS, ConfigPath, default_config, notice_compiles, user_errors

# The pipelines, qs and numba load only inside a command: `qsrank bench --help` imports none
# of them. So the choices and defaults of the options are written here; tests/test_cli_bench.py
# checks them against their sources.
VARIES = ("negatives", "positives", "total", "share")  # qsrank.pipelines.scaling.VARIES
BENCH_LOSSES = ("ap", "ndcg")  # qsrank.pipelines.scaling.LOSSES
CURVE_NAMES = (
    "0-1",
    "ap",
    "ap_qs",
    "ap_search",
    "ap_auto",
    "ap_auto_out",
    "sort_dc",
    "ndcg",
    "ndcg_qs",
    "ndcg_auto",
    "ndcg_auto_out",
    "np.max",
    "np.partition",
    "np.sort",
    "ap_batch",
    "ap_bucket",
    "ap_bucket_sort",
    "ndcg_batch",
    "ndcg_bucket",
    "ndcg_bucket_sort",
    "np.argsort",
)
# `qsrank bench --experiment NAME`: the pipelines that time LAI inside training (Figures 2-3)
BENCH_EXPERIMENTS = ("voc2011_actions",)
TORCH_LAI_PARTS = ("a", "b", "c", "d")
TORCH_LOSS_PARTS = ("curves", "batched", "distributed", "memory")  # torch_loss_bench.PARTS
LTR_PRESETS = ("quick", "tenth", "web30k", "web30k-x10")  # qsrank.pipelines.ltr_bench.PRESETS
# qsrank.pipelines.voc2007_scale.DEFAULTS of the options below
SCALE_DEFAULTS = {
    "images": 500,
    "boxes": 2000,
    "features": 4096,
    "chunk_images": 4,
    "dtype": "float16",
    "seed": 0,
    "repeats": 5,
    "pooled": (10**6, 10**7),
}


def _given(ctx):
    """The options of the bench group that the command line set."""
    return [
        p.opts[0]
        for p in ctx.command.params
        if isinstance(p, click.Option)
        and ctx.get_parameter_source(p.name) is click.core.ParameterSource.COMMANDLINE
    ]


@click.group(invoke_without_command=True, subcommand_metavar="[COMMAND [ARGS]...]")
@click.option(
    "--vary",
    type=click.Choice(VARIES),
    help="Which count grows [config: negatives]; share: a grid of negatives x share "
    "of positives, every exact method and the 0-1 LAI.",
)
@click.option(
    "--loss", type=click.Choice(BENCH_LOSSES + ("all",)), help="Losses to time [config: all]."
)
@click.option("--methods", help=f"Comma-separated curves to time, from: {', '.join(CURVE_NAMES)}.")
@click.option(
    "--repeats",
    type=click.IntRange(min=1),
    help="Warm timed samples per size and curve (with --experiment: trainings).",
)
@click.option("--preset", help="Size preset of the config: paper, large, voc or quick.")
@click.option(
    "--config",
    "config_path",
    type=ConfigPath(),
    help="YAML config, or a default config's name [default: scaling].",
)
@click.option(
    "--out",
    type=click.Path(file_okay=False, path_type=Path),
    help="Run directory [default: runs/scaling/<run-id>].",
)
@click.option("--seed", type=click.IntRange(min=0), help="Seed of the synthetic scores.")
@click.option(
    "--budget",
    type=click.FloatRange(min=0, min_open=True),
    help="Skip a curve once a call is predicted to take longer (seconds).",
)
@click.option(
    "--experiment",
    type=click.Choice(BENCH_EXPERIMENTS),
    help="Time the total LAI time of whole trainings on this experiment's data "
    "instead of single calls on synthetic scores [config: "
    "configs/<experiment>.yaml].",
)
@click.option(
    "--class",
    "action",
    help="Action class of --experiment [config: phoning]; with "
    "--replay, comma-separated classes [phoning].",
)
@click.option(
    "--replay",
    is_flag=True,
    help="Record the score vectors of cutting-plane trainings on the VOC2011 action "
    "data (--config: a voc2011_actions config) and time every exact method on "
    "them, call by call (--repeats rounds [5], --loss).",
)
@click.option(
    "--clock",
    type=click.Choice(["wall", "cpu"]),
    help="Time by the wall clock, or by the process's CPU time on a machine shared "
    "with other jobs [config: wall].",
)
@click.pass_context
def bench(
    ctx,
    config_path,
    out,
    methods,
    budget,
    experiment,
    action,
    replay,
    clock,
    **options,
):
    """Time LAI methods as the sample counts grow (Mohapatra et al., CVPR 2018, Figures 2-3), or run the
    benchmark COMMAND.

    Without a COMMAND: single LAI calls on synthetic scores. With --experiment
    voc2011_actions: whole trainings on the boxes of one class (--class), subsampled;
    rerunning into the same --out resumes, and the figure shows every vary run there.
    """
    if ctx.invoked_subcommand is not None:
        given = _given(ctx)
        if given:
            raise click.UsageError(
                f"{', '.join(given)}: options of `qsrank bench` without a "
                f"command; give those of {ctx.invoked_subcommand} after "
                "its name."
            )
        return
    notice_compiles()
    if replay:
        _replay(config_path, out, action, options["loss"], options["repeats"])
        return
    if experiment is not None:
        _experiment(experiment, config_path, out, methods, budget, action, **options)
        return
    if action is not None:
        raise click.UsageError("--class needs --experiment.")
    _scaling(config_path, out, methods, budget, clock, **options)


def _scaling(config_path, out, methods, budget, clock, **options):
    from qsrank.pipelines import scaling

    if config_path is None:
        config_path = default_config("scaling")
    methods = [name.strip() for name in methods.split(",")] if methods else None
    config = None
    try:
        config = scaling.load_config(
            config_path, methods=methods, budget_s=budget, clock=clock, **options
        )
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
            f"{'stop' if stop else 'sizes'}"
        ) from None
    click.echo(scaling.report(run_dir))
    click.echo(f"\nresults: {run_dir}")


def _replay(config_path, out, action, loss, repeats):
    from qsrank.pipelines import _runner, voc2011_actions
    from qsrank.pipelines.voc2011_actions import replay

    if config_path is None:
        config_path = default_config("voc2011_actions")
    classes = [c.strip() for c in action.split(",")] if action else ["phoning"]
    losses = list(BENCH_LOSSES) if loss in (None, "all") else [loss]
    with user_errors():
        config = _runner.load_config(voc2011_actions.SPEC, config_path, None, classes=classes)
        run_dir = replay.run(config, classes, losses, repeats or 5, out)
    click.echo(replay.read_summary(run_dir))
    click.echo(f"results: {run_dir}")


def _experiment(
    name, config_path, out, methods, budget, action, *, vary, loss, repeats, preset, seed
):
    from qsrank.pipelines import _registry, _runner

    if budget is not None:
        raise click.UsageError(
            "--budget applies to the synthetic-score benchmark only, not with --experiment."
        )
    if config_path is None:
        config_path = default_config(name)
    methods = [m.strip() for m in methods.split(",")] if methods else None
    figures = {
        "vary": vary,
        "loss": loss,
        "methods": methods,
        "repeats": repeats,
        "preset": preset,
        "class": action,
    }
    figures = {k: v for k, v in figures.items() if v is not None}
    with user_errors():
        spec = _registry.experiment(name).FIGURES
        config = _runner.load_config(spec, config_path, None, seed=seed, figures=figures)
        run_dir = _runner.run(spec, config, out)
    click.echo(_runner.report(spec, run_dir))
    click.echo(f"results: {run_dir}")


@bench.command("torch-lai")
@click.argument("parts", nargs=-1, type=click.Choice(TORCH_LAI_PARTS))
@click.option(
    "--repeats",
    type=click.IntRange(min=1),
    default=200,
    show_default=True,
    help="Warm calls per timing of (a).",
)
@click.option(
    "--threads", type=click.IntRange(min=1), default=1, show_default=True, help="Torch threads."
)
def torch_lai(parts, repeats, threads):
    """LAI in deep-net training, PARTS of: (a) a batched call against single calls and bare
    0-1 kernels, (b) the loss's share of a PL-CNN step, (c) the torch method against numba,
    (d) the torch method on a CUDA device [default: all]."""
    from qsrank.pipelines import torch_lai_bench

    notice_compiles()
    with user_errors():
        click.echo(
            torch_lai_bench.run(
                threads=threads, repeats=repeats, parts="".join(parts) or "".join(TORCH_LAI_PARTS)
            )
        )


@bench.command("torch-losses")
@click.option(
    "--out",
    type=click.Path(file_okay=False, path_type=Path),
    help="Run directory [default: runs/torch_losses/<run-id>].",
)
@click.option("--sizes", help="Scores per query, comma-separated [2^8, 2^10, ..., 2^20].")
@click.option("--queries", type=click.IntRange(min=1), default=8, show_default=True)
@click.option("--repeats", type=click.IntRange(min=1), default=5, show_default=True)
@click.option(
    "--parts",
    default=",".join(TORCH_LOSS_PARTS),
    show_default=True,
    help="Comma-separated parts to run.",
)
@click.option(
    "--devices",
    help="Devices of the curves, comma-separated (cpu, cuda) "
    "[default: cpu, and cuda when torch sees one].",
)
def torch_losses(out, sizes, queries, repeats, parts, devices):
    """The rank losses of qs.torch against the surrogates: forward + backward time, peak
    memory, distributed, memory bank."""
    chosen = [p.strip() for p in parts.split(",")]
    unknown = sorted(set(chosen) - set(TORCH_LOSS_PARTS))
    if unknown:
        raise click.BadParameter(
            f"unknown parts {unknown}; choose from {', '.join(TORCH_LOSS_PARTS)}",
            param_hint="--parts",
        )
    given = {"q": queries, "parts": tuple(chosen)}
    if devices:
        given["devices"] = tuple(d.strip() for d in devices.split(","))
        if not set(given["devices"]) <= {"cpu", "cuda"}:
            raise click.BadParameter(
                f"expected cpu and/or cuda; got {devices!r}", param_hint="--devices"
            )
    if sizes:
        try:
            given["sizes"] = tuple(int(n) for n in sizes.split(","))
        except ValueError:
            raise click.BadParameter(
                f"expected comma-separated integers; got {sizes!r}", param_hint="--sizes"
            ) from None
    notice_compiles()
    from qsrank.pipelines import torch_loss_bench

    with user_errors():
        run_dir, report = torch_loss_bench.run(out, repeats=repeats, **given)
    click.echo(report)
    click.echo(f"results: {run_dir}")


@bench.command("voc2007-scale")
@click.option(
    "--images",
    type=click.IntRange(min=1),
    default=SCALE_DEFAULTS["images"],
    show_default=True,
    help="Images of the generated trainval split (5011: the paper's).",
)
@click.option(
    "--boxes", type=click.IntRange(min=2), default=SCALE_DEFAULTS["boxes"], show_default=True
)
@click.option(
    "--features", type=click.IntRange(min=1), default=SCALE_DEFAULTS["features"], show_default=True
)
@click.option(
    "--chunk-images",
    type=click.IntRange(min=1),
    default=SCALE_DEFAULTS["chunk_images"],
    show_default=True,
)
@click.option(
    "--dtype",
    type=click.Choice(["float16", "float32"]),
    default=SCALE_DEFAULTS["dtype"],
    show_default=True,
)
@click.option(
    "--store",
    type=click.Path(file_okay=False),
    help="Also score a box-feature store (qsrank load cnn) read from disk, beside "
    "the generated features of its shape (which then replaces --images, "
    "--boxes, --features, --dtype, --chunk-images).",
)
@click.option(
    "--seed", type=click.IntRange(min=0), default=SCALE_DEFAULTS["seed"], show_default=True
)
@click.option(
    "--scheduler",
    metavar="ADDRESS",
    help="A dask.distributed scheduler's address [default: the threaded scheduler].",
)
@click.option(
    "--repeats", type=click.IntRange(min=1), default=SCALE_DEFAULTS["repeats"], show_default=True
)
@click.option(
    "--pooled",
    type=click.IntRange(min=1),
    multiple=True,
    default=SCALE_DEFAULTS["pooled"],
    show_default=True,
    help="Pooled negative boxes (repeat the option).",
)
@click.option(
    "--out",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Also write the figures as JSON here.",
)
def voc2007_scale(out, **settings):
    """VOC2007 at scale: the Dask scoring pass of the latent AP-SVM over generated features
    or a box store on disk, with peak memory, and the pooled-negative LAI."""
    from qsrank.pipelines import voc2007_scale as pipeline
    from qsrank.pipelines._io import write_json

    notice_compiles()
    with user_errors():
        results = pipeline.run(**settings)
        if out is not None:
            write_json(out, results)
    click.echo(pipeline.report(results))


@bench.command("ltr")
@click.option(
    "--preset",
    type=click.Choice(LTR_PRESETS),
    default="quick",
    show_default=True,
    help="Size: quick (300 queries), tenth (a tenth of MSLR-WEB30K), web30k "
    "(31,531 queries, about 3.8 M documents), web30k-x10 (ten times; about "
    "20 GB on disk, the in-memory parts on its first tenth).",
)
@click.option(
    "--repeats",
    type=click.IntRange(min=1),
    default=5,
    show_default=True,
    help="Timed passes per measure.",
)
@click.option(
    "--train-repeats",
    type=click.IntRange(min=1),
    default=3,
    show_default=True,
    help="Fits of the AP-SVM and of LightGBM.",
)
@click.option(
    "--partition-rows",
    type=click.IntRange(min=1),
    default=1 << 18,
    show_default=True,
    help="Documents per out-of-core partition (whole queries).",
)
@click.option(
    "--store",
    type=click.Path(file_okay=False),
    help="Where the store of the data is written [default: a temporary directory, removed after].",
)
@click.option(
    "--out",
    type=click.Path(file_okay=False, path_type=Path),
    help="Run directory [default: results/ltr_bench/<run-id>].",
)
def ltr(**settings):
    """Learning to rank at scale on generated LETOR-shaped data: the per-query LAI pass
    against X @ w, the AP-SVM against LightGBM lambdarank (time, peak memory), and the
    out-of-core pass on Dask against the in-memory one."""
    from qsrank.pipelines import ltr_bench

    notice_compiles()
    with user_errors():
        run_dir, report = ltr_bench.run(**settings)
    click.echo(report)
    click.echo(f"results: {run_dir}")


@bench.command("cold-start")
@click.option(
    "--repeats",
    type=click.IntRange(min=1),
    default=3,
    show_default=True,
    help="Fresh processes per method and loss.",
)
@click.option(
    "--fresh-cache",
    is_flag=True,
    help="Each repeat starts from an empty NUMBA_CACHE_DIR (a new install).",
)
def cold_start(repeats, fresh_cache):
    """What a new process pays before its first LAI result: the first-call times of every
    method and loss, each in fresh processes."""
    from qsrank.pipelines import cold_start as pipeline

    with user_errors():
        rows = pipeline.run(repeats, fresh_cache)
    click.echo(pipeline.report(rows, repeats, fresh_cache))


@click.command()
@click.argument("run_dir", type=click.Path(exists=True, file_okay=False, path_type=Path))
def plot(run_dir):
    """Redraw the figures of the run in RUN_DIR (PNG and PDF) from its result files: a
    scaling benchmark, a VOC2011 actions figure run, VOC2007 detection, CIFAR-10 or compare;
    for digits and `qsrank fit` runs, their test AP table drawn as bars."""
    from qsrank.pipelines import _registry

    try:
        paths = _registry.redraw(run_dir)
    except USER_ERRORS as err:
        raise click.ClickException(f"cannot redraw {run_dir}: {err}") from None
    click.echo("\n".join(map(str, paths)))
