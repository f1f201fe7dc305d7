"""What the experiments share: the frame of the class x method trainings (VOC2011 actions,
VOC2007 detection), the data's kind, the Markdown of their pages, seeded mini-batches."""

import numpy as np
import pandas as pd

from qsrank.pipelines._replay import spread_text


def timings_frame(records, columns, methods, classes):
    """One row per class x method record in class, then method order: `columns`, then
    ``lai_replay_s`` (each training's replayed totals, a list) and their median."""
    rows = [
        {
            **{c: r.get(c) for c in columns},
            "lai_replay_s": list(r.get("lai_replay_s") or []),
            "lai_replay_median_s": (
                float(np.median(r["lai_replay_s"])) if r.get("lai_replay_s") else None
            ),
        }
        for r in records
    ]
    names = dict.fromkeys([*columns, "lai_replay_s", "lai_replay_median_s"])
    frame = pd.DataFrame(rows, columns=list(names))
    if frame.empty:
        return frame
    order = {**{m: i for i, m in enumerate(methods)}, **{c: i for i, c in enumerate(classes)}}
    return frame.sort_values(["class", "method"], key=lambda s: s.map(order)).reset_index(drop=True)


def unconverged(frame):
    """The trainings of `frame` that stopped before converging."""
    return frame[~frame["converged"].astype(bool)] if len(frame) else frame


def C_text(frame):
    """The C values of the trainings per loss: 'ap: 10/100, 01: 100'."""
    return ", ".join(
        f"{loss}: {'/'.join(f'{c:g}' for c in sorted(set(g['C'])))}"
        for loss, g in frame.groupby("loss", sort=False)
    )


def replayed_ratio(row):
    """'28.2 (27.8-29.8)': a ratio row's median over its replay rounds and range ('' for none)."""
    return spread_text((row.replay_median, row.replay_min, row.replay_max), row.replay_rounds)


def is_synthetic(splits):
    """Whether any split of `splits` (name -> data with a ``source``) is synthetic."""
    return any(d.source.startswith("synthetic") for d in splits.values())


def mini_batches(n, size, seed):
    """The mini-batches (index arrays of `size`) of one pass over `n` samples, seeded."""
    order = np.random.default_rng(seed).permutation(n)
    return [order[i : i + size] for i in range(0, n, size)]


def paragraphs(*parts):
    """A Markdown text of the non-empty `parts`, a blank line between each."""
    return "\n\n".join(filter(None, parts)) + "\n"


def data_note(splits, text, lookalike):
    """'Data: `text`.', saying that our numbers are synthetic when `splits` are: from a
    generated look-alike of `lookalike`."""
    if not is_synthetic(splits):
        return f"Data: {text}."
    return (
        f"Data: {text}. Our numbers are synthetic: they come from a generated look-alike of "
        f"{lookalike}, not from the paper's data."
    )
