"""Sample counts shared by the benchmarks that grow the data: the (positives, negatives) pairs
of a varied count, and the varied count of a table's rows."""


def size_pairs(vary, spec, values, where):
    """(n_pos, n_neg) pairs for ``values`` of the varied count: negatives or positives beside
    ``spec["fixed"]`` of the other, or totals split ``1 : spec["neg_per_pos"]``."""
    if vary == "negatives":
        return [(spec["fixed"], n) for n in values]
    if vary == "positives":
        return [(p, spec["fixed"]) for p in values]
    pairs = [(max(1, round(t / (1 + spec["neg_per_pos"]))), t) for t in values]
    if any(p >= t for p, t in pairs):
        raise ValueError(
            f"{where}: every total must leave at least one negative beside one positive"
        )
    return [(p, t - p) for p, t in pairs]


def varied(frame, vary):
    """The varied count of each row of `frame` (columns n_pos and n_neg)."""
    return {
        "negatives": frame["n_neg"],
        "positives": frame["n_pos"],
        "total": frame["n_pos"] + frame["n_neg"],
    }[vary]
