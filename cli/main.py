"""`qsrank`, the command line of the suite: each command parses, calls one pipeline, prints."""

from pathlib import Path

import click

from pipelines import scaling
from pipelines._io import write_npz
from qs import data

# The repository's config; when the package is installed without it, the built-in defaults.
DEFAULT_CONFIG = Path(__file__).resolve().parents[1] / "configs" / "scaling.yaml"


@click.group()
def main():
    """Exact loss-augmented inference for AP and NDCG losses (Mohapatra et al., CVPR 2018)."""


@main.command()
@click.option("--vary", type=click.Choice(scaling.VARIES),
              help="Which count grows [config: negatives].")
@click.option("--loss", type=click.Choice(scaling.LOSSES + ("all",)),
              help="Losses to time [config: all].")
@click.option("--methods",
              help=f"Comma-separated curves to time, from: {', '.join(scaling.CURVE_NAMES)}.")
@click.option("--repeats", type=click.IntRange(min=1), help="Warm timed calls per size and curve.")
@click.option("--preset", help="Size preset of the config: paper, large, voc or quick.")
@click.option("--config", "config_path",
              type=click.Path(exists=True, dir_okay=False, path_type=Path),
              help="YAML config [default: configs/scaling.yaml].")
@click.option("--out", type=click.Path(file_okay=False, path_type=Path),
              help="Run directory [default: results/scaling/<run-id>].")
@click.option("--seed", type=click.IntRange(min=0), help="Seed of the synthetic scores.")
@click.option("--budget", type=click.FloatRange(min=0, min_open=True),
              help="Skip a curve once a call is predicted to take longer (seconds).")
def bench(config_path, out, methods, budget, **options):
    """Time LAI methods on synthetic scores as the sample counts grow (paper 000, Figures 2-3)."""
    if config_path is None and DEFAULT_CONFIG.is_file():
        config_path = DEFAULT_CONFIG
    methods = [name.strip() for name in methods.split(",")] if methods else None
    try:
        config = scaling.load_config(config_path, methods=methods, budget_s=budget, **options)
        run_dir = scaling.run(config, out)
    except ValueError as err:
        raise click.ClickException(str(err)) from None
    click.echo(scaling.median_tables(*scaling.read_run(run_dir)))
    click.echo(f"\nresults: {run_dir}")


@main.group()
def plot():
    """Redraw the figure of a finished run."""


@plot.command("scaling")
@click.argument("run_dir", type=click.Path(exists=True, file_okay=False, path_type=Path))
def plot_scaling(run_dir):
    """Redraw RUN_DIR/scaling.png and scaling.pdf from RUN_DIR/timings.csv."""
    try:
        paths = scaling.plot_run(run_dir)
    except (OSError, ValueError) as err:
        raise click.ClickException(str(err)) from None
    click.echo("\n".join(map(str, paths)))


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
    try:
        poselet = data.load_poselet(path, feature_dir=features_dir)
        if out is not None:
            write_npz(out, data.cache_arrays(poselet))
    except (OSError, ValueError) as err:
        raise click.ClickException(str(err)) from None
    click.echo(poselet_summary(poselet))
    if out is not None:
        click.echo(f"cache: {out}")


def poselet_summary(poselet):
    """Boxes, images, dimensions, positives per action, sparsity and source, as text."""
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
