"""`qsrank compare`: the ways of training for AP and NDCG side by side.

Every method trains the same model from the same initialisation, on the same data, batches
and budget (epochs, and optionally wall-clock seconds), for each seed; the test set then
gives AP, NDCG, recall at precision 0.9 and the area under the precision-recall curve, each
the mean over the classes (one-vs-rest). The methods (:data:`METHODS`):

- baselines: ``cross_entropy`` (binary cross-entropy of each class against the rest) and
  ``zero_one`` (the binary hinge, :func:`qs.torch.rank_hinge_loss` loss "01");
- ours: ``ap_hinge`` and ``ndcg_hinge``, the structured hinge of the AP / NDCG loss by exact
  loss-augmented inference (:mod:`qs.torch`);
- global objectives (paper 004, :mod:`qs.surrogates.global_objectives`): ``aucpr`` (K
  anchors) and ``recall_at_precision`` (alpha 0.9), their thresholds and multipliers
  stepped by plain SGD at ``loss_lr`` (so the dual rate factor keeps its meaning);
- outside (:mod:`qs.surrogates.outside`): ``smooth_ap``, ``blackbox_ap``, ``libauc_ap``,
  ``libauc_ndcg`` (the ``[compare]`` extra), ``soft_rank_ap`` (torchsort); ``sodeep_ap``
  (:mod:`qs.surrogates.sodeep`, batches cut into groups of the sorter's length).

Data sets: ``voc2011_actions`` (the synthetic look-alike of the VOC2011 action poselet
features, never the paper's data; linear model, "difficult" boxes left out), ``digits``
(scikit-learn's digits, real; linear model on standardised pixels) and ``cifar10``
(digits-as-CIFAR, not CIFAR-10, the narrow PL-CNN of the CIFAR-10 experiment, warm-started
by a few cross-entropy epochs shared by every method). Training time counts the steps only
(evaluation apart); loss time is the loss's forward and backward to the scores, measured
apart from the model's.

Each (data set, method, seed) is kept as ``runs/<data set>__<method>__seed<k>.json``;
running again into the same directory resumes, retraining only what is missing or was made
under other settings (or all, with ``force``).
"""

import importlib.util
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
from matplotlib import colormaps
from matplotlib.figure import Figure
from matplotlib.ticker import NullFormatter
from pydantic import model_validator
from sklearn.metrics import auc, precision_recall_curve
from tqdm import tqdm

from pipelines import _config
from pipelines import _schema as S
from pipelines._config import dump_config
from pipelines._io import atomic_path, save_figure, write_text
from pipelines._provenance import write_provenance
from pipelines._runs import RunStore, claim_run_dir, digest_arrays, settings_key
from pipelines._tables import markdown_table
from qs.metrics import average_precision, ndcg

EXPERIMENT = "compare"
DATASETS = ("voc2011_actions", "digits", "cifar10")
TARGET_PRECISION = 0.9  # the recall-at-precision column


@dataclass(frozen=True)
class Method:
    """A row of the comparison: what it is, what it needs, and how to build its loss."""

    kind: str  # baseline | ours | global objectives | outside
    label: str
    needs: str = "torch"  # a package key of qs.surrogates.outside.PACKAGES, or a module


#: every method `methods:` may name; the losses are built by `make_loss`
METHODS = {
    "cross_entropy": Method("baseline", "binary cross-entropy, one-vs-rest"),
    "zero_one": Method("baseline", "0-1: binary hinge"),
    "ap_hinge": Method("ours", "AP structured hinge, exact LAI"),
    "ndcg_hinge": Method("ours", "NDCG structured hinge, exact LAI"),
    "aucpr": Method("global objectives", "AUCPR, K anchors"),
    "recall_at_precision": Method("global objectives", "recall at precision 0.9"),
    "smooth_ap": Method("outside", "Smooth-AP, temperature 0.01"),
    "blackbox_ap": Method("outside", "AP of black-box ranks"),
    "libauc_ap": Method("outside", "LibAUC AP (SOAP)", "libauc"),
    "libauc_ndcg": Method("outside", "LibAUC NDCG (SONG)", "libauc"),
    "soft_rank_ap": Method("outside", "AP of torchsort soft ranks", "torchsort"),
    "sodeep_ap": Method("outside", "SoDeep AP, frozen sorter", "qs.surrogates.sodeep"),
}
BASELINES = ("cross_entropy", "zero_one")

class Budget(S.Section):
    """A data set's budget (epochs, and seconds: stop after the first epoch past it) and
    Adam's step size and batch size for the model."""

    epochs: S.optional(S.number(integer=True, low=1)) = S.key(
        10, "the budget in epochs (null: seconds only)")
    seconds: S.optional(S.number(low=0, strict=True)) = S.key(
        None, "the budget in seconds: stop after the first epoch past it (null: none)")
    batch_size: S.number(integer=True, low=2) = S.key(256, "mini-batch size")
    lr: S.number(low=0, strict=True) = S.key(0.01, "Adam's step size for the model")

    @model_validator(mode="after")
    def _a_budget(self):
        if self.epochs is None and self.seconds is None:
            raise ValueError("set a budget, epochs or seconds (both are null)")
        return self


class VOCBudget(Budget):
    epochs: S.optional(S.number(integer=True, low=1)) = S.key(
        5, "the budget in epochs (null: seconds only)")
    batch_size: S.number(integer=True, low=2) = S.key(512, "mini-batch size")


class DigitsBudget(Budget):
    epochs: S.optional(S.number(integer=True, low=1)) = S.key(
        20, "the budget in epochs (null: seconds only)")
    batch_size: S.number(integer=True, low=2) = S.key(128, "mini-batch size")


class CifarBudget(Budget):
    epochs: S.optional(S.number(integer=True, low=1)) = S.key(
        3, "the budget in epochs (null: seconds only)")
    batch_size: S.number(integer=True, low=2) = S.key(200, "mini-batch size")
    warm_start_epochs: S.number(integer=True, low=0) = S.key(
        3, "cross-entropy epochs of the PL-CNN's warm start, shared by every method")
    widths: S.sized_list(S.number(integer=True, low=1), 3, "positive integers") = S.key(
        [8, 16, 32], "channels of the PL-CNN's three blocks")


class Options(S.Section):
    """The losses' own settings."""

    num_anchors: S.number(integer=True, low=1) = S.key(20, "AUCPR's anchors")
    dual_rate_factor: S.number(low=0, strict=True) = S.key(
        0.1, "global objectives: the multipliers' ascent, as a fraction of the descent step")
    surrogate: S.choice(("hinge", "xent")) = S.key("xent", "global objectives' surrogate")
    temperature: S.number(low=0, strict=True) = S.key(0.01, "Smooth-AP's sigmoid temperature")
    blackbox_strength: S.number(low=0, strict=True) = S.key(
        1000.0, "black-box AP's interpolation strength")
    libauc_gamma: S.number(low=0, strict=True) = S.key(
        0.9, "LibAUC's moving-average weight (SOAP gamma, SONG gamma0)")
    libauc_num_pos: S.number(integer=True, low=1) = S.key(8, "LibAUC NDCG's num_pos")


class Config(S.Section):
    """`qsrank compare`: every method, data set and seed; the same model, data and budget."""

    experiment: S.choice([EXPERIMENT]) = S.key(EXPERIMENT, "the pipeline this config runs")
    seeds: S.distinct_list(S.number(integer=True, low=0), "integers >= 0") = S.key(
        [0, 1, 2], "training seeds (initialisation and batch order); the data split is fixed")
    methods: S.distinct_list(S.choice(METHODS), "method names") = S.key(
        ["cross_entropy", "zero_one", "ap_hinge", "ndcg_hinge", "aucpr", "recall_at_precision",
         "smooth_ap", "blackbox_ap", "libauc_ap", "libauc_ndcg"], "the methods compared")
    datasets: S.distinct_list(S.choice(DATASETS), "data set names") = S.key(
        list(DATASETS), "the data sets")
    voc2011_actions: VOCBudget = S.key(VOCBudget, "budget and steps on voc2011_actions")
    digits: DigitsBudget = S.key(DigitsBudget, "budget and steps on digits")
    cifar10: CifarBudget = S.key(CifarBudget, "budget, steps and network on cifar10")
    loss_lr: S.number(low=0, strict=True) = S.key(
        0.01, "SGD step of the losses' own parameters (thresholds, multipliers)")
    options: Options = S.key(Options, "the losses' own settings")
    threads: S.optional(S.number(integer=True, low=1)) = S.key(
        None, "torch intra-op threads (null: torch's default)")
    force: S.flag() = S.key(False, "retrain what the run directory holds")

    @model_validator(mode="after")
    def _available(self):
        for name in self.methods:
            check_available(name)
        return self


def load_config(path=None, sets=None, **overrides):
    """The defaults, updated by the YAML file at `path` with `sets` (`--set` keys) laid over
    it, then by the non-None `overrides`; checked."""
    return _config.load_config(path, {}, resolve, overrides, sets)


def resolve(config):
    """The full config: the defaults updated by `config`; a one-line ValueError naming a bad
    key, or an ImportError naming a method whose package is missing."""
    return S.validate(Config, config)


def check_available(name):
    """Raise a one-line ImportError when method `name` needs something not installed."""
    needs = METHODS[name].needs
    if needs.startswith("qs."):
        if importlib.util.find_spec(needs) is None:
            raise ImportError(f"method {name} needs {needs}, which this installation lacks")
        return
    from qs.surrogates.outside import PACKAGES

    module = PACKAGES[needs][0] if needs in PACKAGES else needs
    if importlib.util.find_spec(module) is None:
        how = PACKAGES[needs][1] if needs in PACKAGES else "pip install 'qsrank[torch]'"
        raise ImportError(f"method {name} needs the package {needs}, which is not installed: "
                          f"{how}")


# ---------------------------------------------------------------------------- data

@dataclass
class Data:
    """Train and test inputs (numpy), their one-vs-rest labels (n, Q) bool, and a note."""

    X_train: np.ndarray
    Y_train: np.ndarray
    X_test: np.ndarray
    Y_test: np.ndarray
    note: str
    model: str


def load_data(name, cfg):
    """The fixed split of data set `name` (the same for every seed)."""
    if name == "voc2011_actions":
        from qs.data import ACTIONS, make_voc2011_actions

        splits = make_voc2011_actions(0)
        parts = []
        for split in ("trainval", "test"):
            d = splits[split]
            keep = d.labels != 0  # "difficult" boxes: left out, as in the VOC evaluation
            X = d.X[keep].toarray().astype(np.float32)
            Y = d.labels[keep, None] == np.arange(1, len(ACTIONS) + 1)[None]
            parts += [X, Y]
        return Data(*parts, f"{splits['test'].source}: synthetic VOC2011 action poselet "
                            "features (not the paper's data), difficult boxes left out",
                    "linear")
    if name == "digits":
        from sklearn.datasets import load_digits
        from sklearn.model_selection import train_test_split
        from sklearn.preprocessing import StandardScaler

        X, y = load_digits(return_X_y=True)
        X_tr, X_te, y_tr, y_te = train_test_split(X, y, test_size=0.5, stratify=y,
                                                  random_state=0)
        scaler = StandardScaler().fit(X_tr)
        return Data(scaler.transform(X_tr).astype(np.float32), y_tr[:, None] == np.arange(10),
                    scaler.transform(X_te).astype(np.float32), y_te[:, None] == np.arange(10),
                    "scikit-learn load_digits (real): stratified 50/50 split seed 0, "
                    "standardised on the train half", "linear")
    from pipelines._images import SPLIT, cifar_split

    data = cifar_split(None, SPLIT, 0)
    (X_tr, y_tr), (X_te, y_te) = data["train"], data["test"]
    return Data(X_tr, y_tr[:, None] == np.arange(10), X_te, y_te[:, None] == np.arange(10),
                data["note"], "plcnn")


# ---------------------------------------------------------------------------- losses

def make_loss(name, cfg, data):
    """Method `name`'s loss: (callable (scores (Q, b), positives (Q, b), index (b,)) ->
    scalar, its own parameters)."""
    import torch

    opts = cfg["options"]
    n_train, n_classes = data.Y_train.shape
    if name == "cross_entropy":
        return (lambda s, y, i: torch.nn.functional.binary_cross_entropy_with_logits(
            s, y.to(s.dtype))), []
    if name in ("zero_one", "ap_hinge", "ndcg_hinge"):
        from qs.torch import rank_hinge_loss

        loss = {"zero_one": "01", "ap_hinge": "ap", "ndcg_hinge": "ndcg"}[name]
        return (lambda s, y, i: rank_hinge_loss(s, y, loss=loss)), []
    if name in ("aucpr", "recall_at_precision"):
        from qs.surrogates import global_objectives as go

        common = {"num_labels": n_classes, "surrogate": opts["surrogate"],
                  "dual_rate_factor": opts["dual_rate_factor"]}
        module = (go.AUCPRLoss(num_anchors=opts["num_anchors"], **common) if name == "aucpr"
                  else go.RecallAtPrecisionLoss(TARGET_PRECISION, **common))
        return (lambda s, y, i: module(s, y)), list(module.parameters())
    from qs.surrogates import outside

    if name == "smooth_ap":
        return (lambda s, y, i: outside.smooth_ap_loss(s, y, opts["temperature"])), []
    if name == "blackbox_ap":
        return (lambda s, y, i: outside.blackbox_ap_loss(s, y, opts["blackbox_strength"])), []
    if name == "libauc_ap":
        module = outside.LibAUCAPLoss(n_train, n_classes, gamma=opts["libauc_gamma"])
        return module, []
    if name == "libauc_ndcg":
        module = outside.LibAUCNDCGLoss(n_train, data.Y_train.sum(0),
                                        num_pos=opts["libauc_num_pos"],
                                        gamma0=opts["libauc_gamma"])
        return module, []
    if name == "soft_rank_ap":
        return (lambda s, y, i: outside.soft_rank_ap_loss(s, y)), []
    return _sodeep_loss(), []


def _sodeep_loss():
    """SoDeep's AP loss on the batch cut into groups of the frozen sorter's length (the rest
    of the batch left out of the step; a batch shorter than the length, such as an epoch's
    last, gives a zero loss)."""
    from qs.surrogates import sodeep

    sorter = sodeep.load_sorter()
    length = sorter.length

    def loss(s, y, i):
        groups = s.shape[1] // length
        if groups == 0:
            return (s * 0).sum()
        cut = groups * length
        shape = (s.shape[0] * groups, length)
        return sodeep.sodeep_ap_loss(s[:, :cut].reshape(shape), y[:, :cut].reshape(shape),
                                     sorter=sorter)

    return loss


# ---------------------------------------------------------------------------- training

def _model(data, cfg, seed):
    import torch

    torch.manual_seed(seed)
    if data.model == "linear":
        return torch.nn.Linear(data.X_train.shape[1], data.Y_train.shape[1])
    from qs.nets import PLCNN

    return PLCNN(tuple(cfg["cifar10"]["widths"]))


class _Inputs:
    """numpy inputs -> float32 tensors (images normalised per channel by the train images)."""

    def __init__(self, data):
        self.images = data.model == "plcnn"
        if self.images:
            from pipelines._images import Normaliser

            self.normalise = Normaliser(data.X_train)

    def __call__(self, X):
        import torch

        return self.normalise(X) if self.images else torch.from_numpy(np.ascontiguousarray(X))


def _scores(model, inputs, X, batch=500):
    import torch

    model.eval()
    with torch.no_grad():
        out = np.concatenate([model(inputs(X[i:i + batch])).double().numpy()
                              for i in range(0, len(X), batch)])
    model.train()
    return out


def evaluate(scores, Y):
    """Mean over the classes with a positive and a negative of test AP, NDCG, recall at
    precision 0.9 and AUCPR (trapezoidal area under scikit-learn's precision-recall curve)."""
    rows = []
    for c in range(Y.shape[1]):
        y, s = Y[:, c], scores[:, c]
        if not 0 < y.sum() < len(y):
            continue
        precision, recall, _ = precision_recall_curve(y, s)
        rows.append((average_precision(y, s), ndcg(y, s),
                     float(recall[precision >= TARGET_PRECISION].max(initial=0.0)),
                     float(auc(recall, precision))))
    ap, nd, rap, pr = np.mean(rows, axis=0)
    return {"test_ap": ap, "test_ndcg": nd, "recall_at_p90": rap, "aucpr": pr}


def warm_start(data, cfg, seed, inputs):
    """The PL-CNN after the shared cross-entropy epochs (softmax over the classes), as a
    state dict; every method of this seed starts from it."""
    import torch

    model = _model(data, cfg, seed)
    section = cfg["cifar10"]
    opt = torch.optim.Adam(model.parameters(), lr=section["lr"])
    target = torch.from_numpy(data.Y_train.argmax(1))
    for epoch in range(section["warm_start_epochs"]):
        for idx in _batches(len(target), section["batch_size"], seed, -1 - epoch):
            opt.zero_grad()
            torch.nn.functional.cross_entropy(model(inputs(data.X_train[idx])),
                                              target[idx]).backward()
            opt.step()
    return {k: v.detach().clone() for k, v in model.state_dict().items()}


def _batches(n, size, seed, epoch):
    order = np.random.default_rng([seed, epoch + 1000]).permutation(n)
    return [order[i:i + size] for i in range(0, n, size)]


def train_one(name, data, cfg, dataset, seed, inputs, start=None):
    """Train method `name` on `dataset` with `seed` under the data set's budget: the record
    (history per epoch, final metrics and times)."""
    import torch

    section = cfg[dataset]
    model = _model(data, cfg, seed)
    if start is not None:
        model.load_state_dict(start)
    _warm_up_loss(name, cfg, data, inputs, model, section["batch_size"])
    loss_fn, loss_params = make_loss(name, cfg, data)
    opt = torch.optim.Adam(model.parameters(), lr=section["lr"])
    opt_loss = torch.optim.SGD(loss_params, lr=cfg["loss_lr"]) if loss_params else None
    Y = torch.from_numpy(data.Y_train)
    train_s = loss_s = 0.0
    steps = 0
    history = []
    epoch = 0
    while True:
        for idx in _batches(len(Y), section["batch_size"], seed, epoch):
            began = time.perf_counter()
            scores = model(inputs(data.X_train[idx])).T
            leaf = scores.detach().requires_grad_()
            t0 = time.perf_counter()
            value = loss_fn(leaf, Y[idx].T, torch.from_numpy(idx))
            value.backward()
            loss_s += time.perf_counter() - t0
            opt.zero_grad()
            scores.backward(leaf.grad if leaf.grad is not None else torch.zeros_like(leaf))
            opt.step()
            if opt_loss is not None:
                opt_loss.step()
                opt_loss.zero_grad()
            train_s += time.perf_counter() - began
            steps += 1
            if not np.isfinite(value.item()):
                raise RuntimeError(f"{name} on {dataset} (seed {seed}): the loss became "
                                   f"{value.item()} at step {steps}")
        epoch += 1
        metrics = evaluate(_scores(model, inputs, data.X_test), data.Y_test)
        history.append({"epoch": epoch, "train_s": train_s, "loss_s": loss_s, "steps": steps,
                        **metrics})
        if (section["epochs"] is not None and epoch >= section["epochs"]) or \
                (section["seconds"] is not None and train_s >= section["seconds"]):
            break
    return {"dataset": dataset, "method": name, "seed": seed, "history": history,
            **history[-1], "loss_ms_per_step": 1e3 * loss_s / steps}


def _warm_up_loss(name, cfg, data, inputs, model, batch_size):
    """One untimed forward and backward of a throwaway instance of the loss on the first
    training samples, so first-call costs (imports, numba and torch warm-up) are not timed."""
    import torch

    loss_fn, _ = make_loss(name, cfg, data)
    idx = np.arange(min(batch_size, len(data.Y_train)))
    model.eval()  # no batch-norm statistics updated
    with torch.no_grad():
        scores = model(inputs(data.X_train[idx])).T
    model.train()
    leaf = scores.detach().requires_grad_()
    loss_fn(leaf, torch.from_numpy(data.Y_train[idx]).T, torch.from_numpy(idx)).backward()


# ---------------------------------------------------------------------------- run

def _settings(cfg, dataset, data):
    keys = ("loss_lr", "options")
    return settings_key(dataset=dataset, section=cfg[dataset], data=data.note,
                        data_sha256=digest_arrays(data.X_train, data.Y_train, data.X_test,
                                                  data.Y_test),
                        **{k: cfg[k] for k in keys})


def run(config, out_dir=None, progress=True, overrides=()):
    """Train every (data set, method, seed) not already in the run directory, write the
    tables, the figure and the provenance; return the run directory."""
    import torch

    cfg = resolve(config)
    out = claim_run_dir(out_dir or _config.new_run_dir(EXPERIMENT), EXPERIMENT, "tables")
    if cfg["threads"] is not None:
        torch.set_num_threads(cfg["threads"])
    notes, records = {}, []
    for dataset in cfg["datasets"]:
        data = load_data(dataset, cfg)
        notes[dataset] = data.note
        store = RunStore(out, _settings(cfg, dataset, data))
        inputs = _Inputs(data)
        starts = {}
        units = [(m, s) for m in cfg["methods"] for s in cfg["seeds"]]
        for method, seed in tqdm(units, desc=dataset, unit="run", disable=not progress):
            key = f"{dataset}__{method}__seed{seed}"
            record = None if cfg["force"] else store.get(key)
            if record is None:
                if data.model == "plcnn" and seed not in starts:
                    starts[seed] = warm_start(data, cfg, seed, inputs)
                record = train_one(method, data, cfg, dataset, seed, inputs, starts.get(seed))
                store.put(key, record)
            records.append(record)
    write_outputs(out, cfg, records, notes, overrides)
    return out


# ---------------------------------------------------------------------------- outputs

COLUMNS = {"test_ap": ("test AP", 4), "test_ndcg": ("NDCG", 4),
           "recall_at_p90": ("recall at P>=0.9", 4), "aucpr": ("AUCPR", 4),
           "train_s": ("train s", 2), "loss_ms_per_step": ("loss ms/step", 3)}


def results_frame(records):
    cols = ["dataset", "method", "seed", "epoch", "steps", *COLUMNS]
    return pd.DataFrame([{k: r[k] for k in cols} for r in records], columns=cols)


def summary_frame(results, methods):
    """Per data set and method: the mean and standard deviation over the seeds."""
    grouped = results.groupby(["dataset", "method"], sort=False)
    mean, std = grouped[list(COLUMNS)].mean(), grouped[list(COLUMNS)].std(ddof=1)
    frame = mean.join(std, suffixes=("", "_sd")).reset_index()
    frame["seeds"] = grouped.size().values
    order = {m: k for k, m in enumerate(methods)}
    return frame.sort_values(["dataset", "method"], key=lambda c: c.map(order)
                             if c.name == "method" else c.map(DATASETS.index), kind="stable")


def dataset_table(summary, dataset):
    """One Markdown table: a row per method, each metric as mean ± sd over the seeds."""
    rows = []
    for r in summary[summary.dataset == dataset].itertuples():
        method = METHODS[r.method]
        cells = [f"{r.method}", method.kind]
        for col, (_, digits) in COLUMNS.items():
            mean, sd = getattr(r, col), getattr(r, f"{col}_sd")
            cells.append(f"{mean:.{digits}f}" + ("" if np.isnan(sd) else f" ± {sd:.{digits}f}"))
        rows.append(cells)
    return markdown_table(["method", "kind", *(label for label, _ in COLUMNS.values())], rows)


def report_text(cfg, summary, notes):
    parts = ["# Training for AP and NDCG: the methods side by side (`qsrank compare`)",
             ("Each cell: mean ± standard deviation over the seeds "
              f"{', '.join(map(str, cfg['seeds']))} (initialisation and batch order; the data "
              "split is fixed). Test metrics are means over the classes, one-vs-rest. Train s: "
              "the training steps only; loss ms/step: the loss's forward and backward to the "
              "scores, per step.")]
    for dataset in cfg["datasets"]:
        section = cfg[dataset]
        budget = " and ".join(b for b in (
            f"{section['epochs']} epochs" if section["epochs"] is not None else None,
            f"{section['seconds']:g} s" if section["seconds"] is not None else None) if b)
        model = ("PL-CNN, widths " + str(section["widths"]) + f", after "
                 f"{section['warm_start_epochs']} shared cross-entropy epochs"
                 if dataset == "cifar10" else "linear")
        parts += [f"## {dataset}",
                  (f"Data: {notes[dataset]}. Model: {model}; Adam, lr {section['lr']:g}, "
                   f"batch {section['batch_size']}; budget: {budget}."),
                  dataset_table(summary, dataset)]
    return "\n\n".join(parts) + "\n"


def plot(records, datasets, methods):
    """Test AP against training time, per data set: the mean over the seeds per epoch."""
    history = pd.DataFrame([{**h, "dataset": r["dataset"], "method": r["method"]}
                            for r in records for h in r["history"]])
    fig = Figure(figsize=(5.2 * len(datasets), 4.4))
    axes = fig.subplots(1, len(datasets), squeeze=False)[0]
    # one colour per method (more than ten): tab20's dark shades, then its light ones
    colours = colormaps["tab20"].colors
    for ax, dataset in zip(axes, datasets):
        for i, method in enumerate(methods):
            rows = history[(history.dataset == dataset) & (history.method == method)]
            curve = rows.groupby("epoch")[["train_s", "test_ap"]].mean()
            ax.plot(curve.train_s, curve.test_ap, marker="o", markersize=3, label=method,
                    color=colours[2 * i % 20 + i // 10 % 2],
                    linestyle="--" if method in BASELINES else "-")
        ax.set_xscale("log")
        ax.xaxis.set_minor_formatter(NullFormatter())  # no crowded labels
        ax.set_xlabel("training time (s, log scale)")
        ax.set_ylabel("test AP (mean over classes)")
        ax.set_title(dataset, fontsize=10)
        ax.grid(alpha=0.3)
    axes[-1].legend(fontsize=7)
    fig.tight_layout()
    return fig


def write_outputs(out, cfg, records, notes, overrides=()):
    """tables.md, results.csv, summary.csv, history.csv, figure.png/pdf, config, provenance."""
    import torch

    results = results_frame(records)
    summary = summary_frame(results, cfg["methods"])
    history = pd.DataFrame([{"dataset": r["dataset"], "method": r["method"], "seed": r["seed"],
                             **h} for r in records for h in r["history"]])
    for name, frame in (("results.csv", results), ("summary.csv", summary),
                        ("history.csv", history)):
        with atomic_path(out / name) as tmp:
            frame.to_csv(tmp, index=False)
    write_text(out / "tables.md", report_text(cfg, summary, notes))
    save_figure(plot(records, cfg["datasets"], cfg["methods"]), out / "figure")
    write_text(out / "config.yaml", dump_config(cfg))
    write_provenance(out, cfg["seeds"], notes, {**cfg, "torch_threads": torch.get_num_threads()},
                     overrides=overrides)


def report(run_dir):
    """What `qsrank compare` prints: the run's tables.md."""
    return (Path(run_dir) / "tables.md").read_text(encoding="utf-8")
