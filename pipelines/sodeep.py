"""SoDeep's sorters (Engilberge et al., CVPR 2019): `qsrank sodeep train` writes a checkpoint,
`qsrank sodeep eval` the L1 rank error beside the paper's Table 1."""

import glob
import time
from pathlib import Path

from tqdm import tqdm

from qs.data.lock import OutputLock
from qsrank.pipelines._io import TEMPORARY, TEMPORARY_SUFFIX, atomic_path
from qsrank.pipelines._provenance import provenance
from qsrank.pipelines._tables import fmt, markdown_table


def train(kind, length, steps, seed, out, *, progress=True, **options):
    """Train a sorter with a progress bar and write its checkpoint to `out` atomically, one process
    at a time; return its metadata. `options`: `train_sorter`'s keywords (None: its default)."""
    import torch

    from qs.surrogates import sodeep

    out = Path(out)
    if out.is_dir():
        raise ValueError(f"--out {out} is a directory; give the checkpoint's file name")
    options = {k: v for k, v in options.items() if v is not None}
    running = {"loss": None}
    with (
        OutputLock(out.with_name(f".{out.name}.lock"), f"the checkpoint {out}"),
        tqdm(
            total=steps, desc=f"sodeep {kind} d={length}", unit="step", disable=not progress
        ) as bar,
    ):
        for tmp in out.parent.glob(f".{glob.escape(out.name)}.*{TEMPORARY_SUFFIX}"):  # a kill's
            if TEMPORARY.fullmatch(tmp.name):
                tmp.unlink()

        def callback(step, loss):
            prev = running["loss"]
            running["loss"] = loss if prev is None else 0.98 * prev + 0.02 * loss
            bar.update(1)
            if step % 10 == 0 or step == steps:
                bar.set_postfix(l1=f"{running['loss']:.4f}")

        start = time.perf_counter()
        sorter, meta = sodeep.train_sorter(kind, length, steps, seed, callback=callback, **options)
        meta["train_seconds"] = round(time.perf_counter() - start, 1)
        meta["provenance"] = provenance(
            seed, "synthetic score vectors (qs.surrogates.sodeep.synthetic_scores)"
        )
        try:
            with atomic_path(out) as tmp:
                torch.save(sodeep.sorter_state(sorter, meta), tmp)
        except OSError as err:
            raise ValueError(f"cannot write checkpoint {out}: {err.strerror or err}") from None
    return meta


def train_report(meta, out):
    """What `qsrank sodeep train` prints."""
    l1 = fmt(meta["test_l1"], 4) if meta["test_l1"] is not None else "-"
    return (
        f"{meta['kind']} sorter, length {meta['length']}, {meta['parameters']:,} "
        f"parameters, {meta['steps']} steps in {meta['train_seconds']} s: test L1 {l1} "
        f"({meta['test_vectors']} vectors)\ncheckpoint: {out}"
    )


def evaluate(checkpoints=None, n_vectors=10_000, seed=None):
    """Rows (sorter, hyper-parameters, length, parameters, our L1, paper's L1) of the handcrafted
    ranker and `checkpoints` (default: the shipped ones) on one set of test vectors."""
    from qs.surrogates import sodeep

    seed = sodeep.TEST_SEED if seed is None else seed
    if checkpoints:
        sorters = [sodeep.load_sorter(path) for path in checkpoints]
    else:
        sorters = [sodeep.load_sorter(kind=kind) for kind in ("cnn", "lstm")]
    lengths = sorted({s.length for s in sorters})
    handcrafted = sodeep.HandcraftedSorter()
    rows = [
        (
            "handcrafted",
            f"scale {handcrafted.scale}",
            length,
            0,
            sodeep.rank_l1_error(handcrafted, length, n_vectors, seed),
            sodeep.PAPER_L1["handcrafted"],
        )
        for length in lengths
    ]
    for sorter in sorters:
        hyper = "; ".join(
            f"{k} {','.join(map(str, v)) if isinstance(v, list) else v}"
            for k, v in sorter.hyper().items()
        )
        rows.append(
            (
                sorter.kind,
                hyper,
                sorter.length,
                sodeep.n_parameters(sorter),
                sodeep.rank_l1_error(sorter, sorter.length, n_vectors, seed),
                sodeep.PAPER_L1[sorter.kind],
            )
        )
    return rows


def eval_table(rows, n_vectors):
    """The rows of :func:`evaluate` as Markdown, beside the paper's Table 1."""
    header = [
        "sorter",
        "hyper-parameters",
        "length",
        "parameters",
        f"L1, ours ({n_vectors} synthetic vectors)",
        "L1, paper (length 100)",
    ]
    return markdown_table(
        header,
        [
            (name, hyper, length, f"{params:,}", fmt(ours, 4), fmt(paper, 4))
            for name, hyper, length, params, ours, paper in rows
        ],
    )
