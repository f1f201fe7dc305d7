"""`qsrank sodeep`: SoDeep's learned sorters (Engilberge et al., CVPR 2019): train one, or
compare their rank error."""

from pathlib import Path

import click

from qsrank.common import user_errors

SORTER_KINDS = ("lstm", "cnn")  # qs.surrogates.sodeep.KINDS
SORTER_LENGTH = 64  # qs.surrogates.sodeep.DEFAULT_LENGTH


@click.group()
def sodeep():
    """SoDeep's learned sorters (Engilberge et al., CVPR 2019): train one, or compare their
    rank error."""


@sodeep.command("train")
@click.option(
    "--kind",
    type=click.Choice(SORTER_KINDS),
    default="lstm",
    show_default=True,
    help="Bidirectional LSTM or 1-D CNN sorter.",
)
@click.option(
    "--length",
    type=click.IntRange(min=2),
    default=SORTER_LENGTH,
    show_default=True,
    help="Length of the score vectors it ranks.",
)
@click.option(
    "--steps",
    type=click.IntRange(min=1),
    default=2000,
    show_default=True,
    help="Adam steps, each on a fresh batch of synthetic vectors.",
)
@click.option("--seed", type=click.IntRange(min=0), default=0, show_default=True)
@click.option(
    "--size",
    type=click.Choice(["default", "full"]),
    default="default",
    show_default=True,
    help="full: the paper's LSTM (hidden 512).",
)
@click.option("--hidden", type=click.IntRange(min=1), help="LSTM hidden units (overrides --size).")
@click.option("--batch-size", type=click.IntRange(min=1), default=128, show_default=True)
@click.option(
    "--lr",
    type=click.FloatRange(min=0, min_open=True),
    help="Adam's learning rate [lstm 1e-2, cnn 1e-3]; halves every quarter of --steps.",
)
@click.option(
    "--test-vectors",
    type=click.IntRange(min=0),
    default=10_000,
    show_default=True,
    help="Synthetic test vectors of the recorded L1 error (0: none).",
)
@click.option(
    "--out",
    required=True,
    type=click.Path(dir_okay=False, path_type=Path),
    help="Checkpoint file to write.",
)
def sodeep_train(kind, length, steps, seed, size, hidden, batch_size, lr, test_vectors, out):
    """Train a sorter on synthetic score vectors (L1 loss on the ranks) and save it."""
    from qsrank.pipelines import sodeep as pipeline

    with user_errors():
        meta = pipeline.train(
            kind,
            length,
            steps,
            seed,
            out,
            size=size,
            batch_size=batch_size,
            lr=lr,
            test_vectors=test_vectors,
            hidden=hidden,
        )
    click.echo(pipeline.train_report(meta, out))


@sodeep.command("eval")
@click.option(
    "--checkpoint",
    "checkpoints",
    multiple=True,
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    help="A sorter checkpoint (repeatable) [default: the shipped LSTM and CNN].",
)
@click.option(
    "--vectors",
    type=click.IntRange(min=1),
    default=10_000,
    show_default=True,
    help="Synthetic test vectors.",
)
def sodeep_eval(checkpoints, vectors):
    """L1 rank error of the sorters and the handcrafted ranker, beside the paper's Table 1."""
    from qsrank.pipelines import sodeep as pipeline

    with user_errors():
        rows = pipeline.evaluate(list(checkpoints), vectors)
    click.echo(pipeline.eval_table(rows, vectors))
