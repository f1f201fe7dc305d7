"""`qsrank load`: validate a data set, summarise it, and cache it (poselet features as .npz;
box features as a chunked store)."""

import os
from pathlib import Path

import click

from qsrank.common import USER_ERRORS, user_errors


@click.group()
def load():
    """Validate a data set, summarise it and cache it."""


@load.command("poselet")
@click.argument("path", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option(
    "--features-dir",
    type=click.Path(exists=True, file_okay=False, path_type=Path),
    help="Where the NAME_ID.feature files are [default: beside PATH].",
)
@click.option(
    "--out",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Write the validated data to this .npz cache.",
)
def load_poselet(path, features_dir, out):
    """Read the VOC2011 action poselet list file PATH and its feature files."""
    from qs import data
    from qsrank.pipelines._io import write_npz

    with user_errors():
        poselet = data.load_poselet(path, feature_dir=features_dir)
        if out is not None:
            write_npz(out, data.cache_arrays(poselet))
    click.echo(poselet_summary(poselet))
    if out is not None:
        click.echo(f"cache: {out}")


@load.command("cnn")
@click.argument("source", nargs=-1, required=True)
@click.option(
    "--out",
    required=True,
    type=click.Path(path_type=Path),
    help="The store to write (a directory; never overwritten; an unfinished OUT.partial resumes).",
)
@click.option(
    "--dtype",
    type=click.Choice(["float16", "float32"]),
    default="float16",
    show_default=True,
    help="Storage type of the features.",
)
@click.option(
    "--workers",
    type=click.IntRange(min=1),
    default=min(4, os.cpu_count() or 1),
    show_default=True,
    help="Processes reading the input files.",
)
@click.option(
    "--chunk-images",
    type=click.IntRange(min=1),
    help="Images per chunk [default: about 64 MiB of features].",
)
@click.option(
    "--features-dir",
    type=click.Path(exists=True, file_okay=False, path_type=Path),
    help="List file: where the STEM_id.feature files of relative stems are "
    "[default: beside it]; absolute stems are read as given.",
)
@click.option(
    "--features-root",
    type=click.Path(exists=True, file_okay=False, path_type=Path),
    help="List file: refuse any stem whose feature files lie outside this "
    "directory (links followed).",
)
@click.option(
    "--features",
    "n_features",
    type=click.IntRange(min=1),
    help="Feature dimension (list file: required; synthetic: [64]).",
)
@click.option(
    "--layout",
    type=click.Choice(["pooled", "unpooled"]),
    help="List file: the released reader's layout, pooled (also test files) or "
    "unpooled (is_fs label STEM n_boxes per image) [default: pooled].",
)
@click.option(
    "--annotations",
    type=click.Path(exists=True, file_okay=False, path_type=Path),
    help="Directory of VOC annotation XML files (ID.xml): objects, difficult flags, image sizes.",
)
@click.option(
    "--image-set",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    help="R-CNN caches: a VOC image-set list naming the images (ID.mat in SOURCE).",
)
@click.option(
    "--split",
    help="Split name stored with the data [synthetic: trainval; image set: its file name].",
)
@click.option(
    "--scale",
    type=click.FloatRange(0, 1, min_open=True),
    default=0.05,
    show_default=True,
    help="Synthetic: fraction of VOC2007's image count.",
)
@click.option(
    "--seed", type=click.IntRange(min=0), default=0, show_default=True, help="Synthetic: the seed."
)
@click.option(
    "--boxes",
    type=click.IntRange(min=2),
    default=40,
    show_default=True,
    help="Synthetic: boxes per image.",
)
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
        path = convert.convert(
            src,
            out,
            chunk_images=chunk_images,
            workers=workers,
            split=split,
            progress=True,
            stats=stats,
        )
        click.echo(
            f"{store_summary(open_store(path))}   written: {stats['blocks_written']} "
            f"chunks ({stats['blocks_resumed']} resumed) in {stats['total_s']:.1f} s"
        )
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


def cnn_source(
    source,
    dtype,
    split,
    *,
    n_features,
    features_dir,
    features_root,
    layout,
    annotations,
    image_set,
    scale,
    seed,
    boxes,
):
    """The `qs.data.sources` source that `qsrank load cnn SOURCE` names."""
    from qs.data import sources
    from qs.data.voc2007 import SyntheticVOC2007

    given = {
        "--features-dir": features_dir,
        "--features-root": features_root,
        "--layout": layout,
        "--annotations": annotations,
        "--image-set": image_set,
    }
    if source == ("synthetic",):
        extra = [k for k, v in given.items() if v is not None]
        if extra:
            raise click.UsageError(f"{', '.join(extra)} do not apply to synthetic data.")
        gen = SyntheticVOC2007(seed, scale, boxes, n_features or 64)
        return sources.SyntheticSource(gen, split or "trainval", dtype)
    paths = [Path(s) for s in source]
    missing = [str(p) for p in paths if not p.exists()]
    if missing:
        raise ValueError(f"No such file or directory: {', '.join(missing)}.")
    if len(paths) == 1 and not paths[0].is_dir() and paths[0].suffix.lower() != ".mat":
        if image_set is not None:
            raise click.UsageError("--image-set applies to R-CNN .mat caches, not a list file.")
        return sources.LatentListSource(
            paths[0],
            n_features,
            dtype,
            layout=layout or "pooled",
            feature_dir=features_dir,
            annotations=annotations,
            feature_root=features_root,
        )
    for option in ("--features-dir", "--features-root", "--layout"):
        if given[option] is not None:
            raise click.UsageError(f"{option} applies to a latent list file.")
    if len(paths) > 1 and any(p.is_dir() or p.suffix.lower() != ".mat" for p in paths):
        raise click.UsageError("Several SOURCE paths must all be .mat files.")
    return sources.RcnnSource(
        paths[0] if len(paths) == 1 and paths[0].is_dir() else paths,
        dtype,
        annotations=annotations,
        image_set=image_set,
    )


def store_summary(store):
    """One line: the store, its size, shape and source."""
    size = sum(f.stat().st_size for f in Path(store.path).rglob("*") if f.is_file())
    return (
        f"store: {store.path}   images: {store.n_images}   boxes: "
        f"{int(store.counts[:].sum())}   K_max: {store.k_max}   d: {store.d}   "
        f"{store.dtype.name}   chunks of {store.chunk_images} images   {size:,} bytes   "
        f"source: {store.source}"
    )


def poselet_summary(poselet):
    """Boxes, images, dimensions, positives per action, sparsity and source, as text."""
    from qs import data

    n_boxes, n_dims = poselet.X.shape
    labels = poselet.labels
    n_other = int(((labels < 0) | (labels > len(data.ACTIONS))).sum())
    lines = [
        (
            f"boxes: {n_boxes}   images: {poselet.n_images}   dimensions: {n_dims} "
            f"({'2404 features + bias' if poselet.bias else 'no bias'})"
        ),
        (
            f"ignored (label 0): {int((labels == data.IGNORE).sum())}   other actions: {n_other}   "
            f"non-zeros: {poselet.X.nnz} ({poselet.X.nnz / max(n_boxes * n_dims, 1):.2%})"
        ),
        "positives per action:",
    ]
    lines += [
        f"  {k:2d} {name:<18} {count}"
        for k, (name, count) in enumerate(poselet.positives_per_class().items(), start=1)
    ]
    return "\n".join(lines + [f"source: {poselet.source}"])
