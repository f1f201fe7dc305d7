"""CIFAR-10 (Mohapatra et al., CVPR 2018, Section 4.3): the PL-CNN trained for the 0-1, AP and NDCG
losses.

The network (:class:`qs.nets.PLCNN`) is warm-started as in the paper, by a few epochs of
Adadelta (cross-entropy epochs, then multi-class hinge epochs), and from that one warm start
every method is trained on its structured hinge, one ranking per class per mini-batch
(``qs.torch.rank_hinge_loss`` on the 10 x batch class scores), either end to end by SGD
(``training: end_to_end``, the default) or by the paper's layer-wise SVM training
(``training: layerwise``: per layer, last to first, the activation pattern fixed, a
proximal structured SVM solved by block-coordinate Frank-Wolfe over the mini-batches). The
methods: ``zero_one`` (the binary hinge of each class), ``ap_yue`` and ``ap_qs`` (AP loss;
LAI of Yue et al. or the paper's quicksort-flavoured LAI), and ``ndcg_chakrabarti`` and
``ndcg_qs`` (NDCG loss); ``ap_auto`` and ``ndcg_auto`` (our fastest exact LAI) on request.
The exact methods of one loss give the same subgradients, so they train the same network;
only their LAI time differs. Batch norm is frozen (running statistics, an affine map)
during the rank-loss training, as in the paper.

Each phase (``warm_cross_entropy``, ``warm_hinge``, then each method) keeps a checkpoint per
epoch (layer-wise: per layer solved) in ``checkpoints/<phase>.pt``; running again into the
same directory resumes, skipping finished phases unless ``force``. Training time counts the
steps only (evaluation apart); LAI time is the time inside ``rank_hinge_loss``'s forward
(the exact LAI of the 10 queries and its bookkeeping), numba compiled beforehand.

Data: ``data: null`` is digits-as-CIFAR (scikit-learn's digits upsampled to 32x32x3, no
download), never reported as CIFAR-10; ``data: PATH`` reads the CIFAR-10 python or binary
batches (:func:`qs.data.cifar10.load_cifar10`). Images are normalised per channel by the
training split's mean and standard deviation.
"""

import hashlib
import time
from pathlib import Path

import numpy as np
import pandas as pd
from matplotlib.figure import Figure
from pydantic import model_validator
from tqdm import tqdm

from pipelines import _schema as S
from pipelines._config import merge
from pipelines._images import SPLIT, Normaliser, cifar_split, is_digits
from pipelines._io import atomic_path, read_csv, run_data_note, save_figure, write_text
from pipelines._methods import inferences, selected_methods
from pipelines._runner import Experiment
from pipelines._runs import same, settings_key
from pipelines._tables import CVPR2018, markdown_table
from qs.metrics import average_precision, ndcg

EXPERIMENT = "cifar10"
#: method -> (loss, LAI method of qs.inference)
METHODS = {
    "zero_one": ("01", "zero_one"),
    "ap_yue": ("ap", "yue"),
    "ap_qs": ("ap", "qs"),
    "ap_auto": ("ap", "auto"),
    "ndcg_chakrabarti": ("ndcg", "chakrabarti"),
    "ndcg_qs": ("ndcg", "qs"),
    "ndcg_auto": ("ndcg", "auto"),
}
LOSSES = ("01", "ap", "ndcg")
INFERENCES = inferences(METHODS)
WARM_PHASES = ("warm_cross_entropy", "warm_hinge")
TRAININGS = ("end_to_end", "layerwise")
DEVICES = ("cpu", "cuda", "auto")
WARM_OPTIMIZERS = {"adadelta": "Adadelta", "sgd": "SGD"}
# Mohapatra et al., CVPR 2018, Section 4.3 (real CIFAR-10, layer-wise training): test mean AP and
# mean NDCG in percent per loss, training time in hours per method.
PAPER_MAP = {"01": 84.22, "ap": 85.28}
PAPER_NDCG = {"01": 95.31, "ndcg": 96.14}
PAPER_HOURS = {"ap_yue": 1.974, "ap_qs": 1.589, "ndcg_chakrabarti": 2.217, "ndcg_qs": 1.632}
EVAL_BATCH = 500

PRESETS = {
    "default": {},
    # The paper's data, split, network and batch size; the epochs are ours (the paper's
    # layer-wise schedule does not map onto epochs of end-to-end training).
    "full": {"split": {"train": 45000, "val": 5000, "test": 10000}, "widths": [64, 128, 256],
             "warm_start": {"cross_entropy_epochs": 20, "hinge_epochs": 5},
             "epochs": 10, "device": "auto"},
}


class Split(S.Section):
    train: S.number(integer=True, low=1) = S.key(SPLIT["train"], "training images")
    val: S.number(integer=True, low=0) = S.key(SPLIT["val"], "validation images (drawn from "
                                               "the training pool)")
    test: S.number(integer=True, low=1) = S.key(SPLIT["test"], "test images")


class WarmStart(S.Section):
    cross_entropy_epochs: S.number(integer=True, low=0) = S.key(4, "cross-entropy epochs")
    hinge_epochs: S.number(integer=True, low=0) = S.key(1, "multi-class hinge epochs")
    optimizer: S.choice(WARM_OPTIMIZERS) = S.key(
        "adadelta", "adadelta (lr 1.0, as the paper) or sgd (with the run's momentum and "
        "weight decay)")
    lr: S.number(low=0, strict=True) = S.key(1.0, "the warm start's learning rate")


class Layerwise(S.Section):
    C: S.number(low=0, strict=True) = S.key(1000.0, "weight of the mean structured hinge")
    proximal: S.number(low=0, strict=True) = S.key(100.0, "proximal weight")
    passes: S.number(integer=True, low=1) = S.key(1, "passes over the mini-batches per layer")


class Config(S.Section):
    """The CIFAR-10 experiment; the defaults are the `default` preset: small and quick on 2
    CPU cores, no download."""

    experiment: S.choice([EXPERIMENT]) = S.key(EXPERIMENT, "the pipeline this config runs")
    preset: S.choice(PRESETS) = S.key("default", "default (digits-as-CIFAR, narrow, quick) "
                                      "or full (the paper's data, split, network)")
    seed: S.number(integer=True, low=0) = S.key(
        0, "network initialisation, data split and mini-batch order")
    data: S.optional(S.text()) = S.key(
        None, "null: digits-as-CIFAR; else the folder of the CIFAR-10 batches")
    split: Split = S.key(Split, "images per part of the split")
    widths: S.sized_list(S.number(integer=True, low=1), 3, "positive integers") = S.key(
        [8, 16, 32], "channels of the three blocks (paper: 64, 128, 256)")
    batch_size: S.number(integer=True, low=2) = S.key(200, "mini-batch size")
    threads: S.optional(S.number(integer=True, low=1)) = S.key(
        None, "torch intra-op threads (null: torch's default)")
    device: S.choice(DEVICES) = S.key(
        "cpu", "the network's device (auto: cuda when torch sees one); the LAI of a named "
        "method runs on the CPU")
    warm_start: WarmStart = S.key(WarmStart, "the paper's warm start (after Berrada et al.)")
    epochs: S.number(integer=True, low=1) = S.key(
        3, "per method, after the warm start (layer-wise: sweeps over the layers)")
    training: S.choice(TRAININGS) = S.key(
        "end_to_end", "end_to_end (SGD on the whole net) or layerwise (the paper's)")
    layerwise: Layerwise = S.key(
        Layerwise, "layer-wise SVM: per layer, proximal/2 |theta - theta_prev|^2 + C * mean "
        "structured hinge, by block-coordinate Frank-Wolfe")
    lr: S.number(low=0, strict=True) = S.key(0.01, "the methods' SGD learning rate")
    momentum: S.number(low=0) = S.key(0.9, "SGD momentum")
    weight_decay: S.number(low=0) = S.key(5e-4, "weight decay")
    freeze_bn: S.flag() = S.key(True, "batch norm as a fixed affine map in the rank-loss "
                                "training")
    methods: S.distinct_list(S.choice(METHODS), "method names") = S.key(
        ["zero_one", "ap_yue", "ap_qs", "ndcg_chakrabarti", "ndcg_qs"], "methods to train")
    loss: S.optional(S.choice(LOSSES)) = S.key(None, "run only the methods of this loss")
    inference: S.optional(S.choice(INFERENCES)) = S.key(
        None, "run only the methods of this LAI method")
    force: S.flag() = S.key(False, "retrain finished methods (the warm start is kept while "
                            "valid)")

    @model_validator(mode="before")
    @classmethod
    def _preset(cls, config):
        """The preset's values under the config's."""
        preset = config.get("preset", "default") if isinstance(config, dict) else None
        return merge(PRESETS[preset], config) if preset in PRESETS else config

    @model_validator(mode="after")
    def _consistent(self):
        if self.preset == "full" and self.data is None:
            raise ValueError("preset full is the paper's setting on real CIFAR-10: set data: "
                             "to the folder of the CIFAR-10 batches (python or binary version)")
        if not selected_methods(METHODS, self.model_dump()):
            raise ValueError(f"no method of {self.methods} has "
                             + " and ".join(f"{k} {getattr(self, k)!r}"
                                            for k in ("loss", "inference")
                                            if getattr(self, k) is not None))
        return self


def pick_device(device, cuda_available):
    """The torch device of the config's `device` (auto: cuda when one is available)."""
    if device == "auto":
        return "cuda" if cuda_available else "cpu"
    if device == "cuda" and not cuda_available:
        raise ValueError("device is cuda, but torch sees no CUDA device; set device: cpu or "
                         "auto")
    return device


# ---------------------------------------------------------------------------- data

def load_data(cfg):
    """{'train', 'val', 'test'}: (uint8 images, labels), the seeded split of the configured
    sizes, and 'note': where the images came from."""
    return cifar_split(cfg["data"], cfg["split"], cfg["seed"])


def _clock(device):
    """perf_counter once the device's queued work is done (CUDA runs asynchronously)."""
    if device == "cuda":
        import torch

        torch.cuda.synchronize()
    return time.perf_counter()


# ---------------------------------------------------------------------------- training

def _rank_hinge_loss():
    """qs.torch.rank_hinge_loss, imported at run time (the [torch] extra)."""
    from qs.torch import rank_hinge_loss

    return rank_hinge_loss


def _settings(cfg, note, phase):
    """What a phase's checkpoint must share with the run to be resumed: the code's version
    (edited code retrains), the data and the settings the phase uses (a method's start, the
    warm start, is checked by its digest)."""
    keys = ("seed", "split", "widths", "batch_size", "momentum", "weight_decay")
    if phase in WARM_PHASES:
        keys += ("warm_start",)
    else:
        keys += ("epochs", "training", "layerwise", "lr", "freeze_bn")
    return settings_key(data=note, **{k: cfg[k] for k in keys})


def _copy(state):
    """A state dict's tensors copied (``state_dict()`` shares them with the live model)."""
    return {k: v.detach().clone() for k, v in state.items()}


def _digest(state):
    """sha256 of a model state dict's tensors: a phase resumes only from the same start."""
    h = hashlib.sha256()
    for key, value in state.items():
        h.update(key.encode())
        h.update(value.detach().cpu().contiguous().numpy().tobytes())
    return h.hexdigest()[:16]


def _phase_loss(phase, loss_fn):
    """(loss of (scores, labels) -> (loss tensor, LAI seconds), is a rank loss) of a phase."""
    import torch

    if phase == "warm_cross_entropy":
        return (lambda s, y: (torch.nn.functional.cross_entropy(s, y), 0.0)), False
    if phase == "warm_hinge":
        return (lambda s, y: (torch.nn.functional.multi_margin_loss(s, y), 0.0)), False
    loss, inference = METHODS[phase]

    def rank_loss(scores, y):
        onehot = torch.nn.functional.one_hot(y, scores.shape[1]).T.contiguous()
        start = _clock(scores.device.type)
        value = loss_fn(scores.T, onehot, loss=loss, method=inference, reduction="mean")
        return value, _clock(scores.device.type) - start

    return rank_loss, True


def evaluate(model, normalise, images, labels):
    """(mean AP, mean NDCG, per-class AP, per-class NDCG) of the model's class scores."""
    import torch

    model.eval()
    with torch.no_grad():
        scores = np.concatenate([model(normalise(images[i:i + EVAL_BATCH])).double().cpu().numpy()
                                 for i in range(0, len(images), EVAL_BATCH)])
    classes = [c for c in range(scores.shape[1]) if 0 < (labels == c).sum() < len(labels)]
    ap = {c: average_precision(labels == c, scores[:, c]) for c in classes}
    nd = {c: ndcg(labels == c, scores[:, c]) for c in classes}
    return float(np.mean(list(ap.values()))), float(np.mean(list(nd.values()))), ap, nd


def _save(path, state):
    import torch

    with atomic_path(path) as tmp:
        torch.save(state, tmp)


def _load(path, settings):
    """The checkpoint at `path` if it exists and was trained under `settings`, else None."""
    import torch

    if not path.is_file():
        return None
    state = torch.load(path, map_location="cpu", weights_only=True)
    return state if same(state.get("settings"), settings) else None


def _mini_batches(cfg, n, epoch):
    """The seeded mini-batches (index arrays) of an epoch or a sweep over ``n`` images."""
    order = np.random.default_rng([cfg["seed"], epoch]).permutation(n)
    return [order[i:i + cfg["batch_size"]] for i in range(0, n, cfg["batch_size"])]


def _sgd_epoch(cfg, model, optimizer, step_loss, data, normalise, epoch, bar):
    """One epoch of the optimizer in seeded mini-batches: (the measured time of each step
    (s), LAI s, mean loss)."""
    import torch

    X, y = data["train"]
    labels = torch.from_numpy(y).to(normalise.device)
    batches = _mini_batches(cfg, len(y), epoch)
    step_s, lai_s, total = [], 0.0, 0.0
    for i, idx in enumerate(batches):
        began = _clock(normalise.device)
        scores = model(normalise(X[idx]))
        value, spent = step_loss(scores, labels[idx])
        optimizer.zero_grad(set_to_none=True)
        value.backward()
        optimizer.step()
        step_s.append(_clock(normalise.device) - began)
        lai_s += spent
        total += value.detach().item()
        bar.update()
        bar.set_postfix(loss=f"{total / (i + 1):.4f}")
    return step_s, lai_s, total / len(batches)


def _svm_layer(cfg, model, layer, step_loss, data, normalise, sweep, bar):
    """One layer's proximal structured SVM (:func:`qs.torch.layerwise.layerwise_svm`) over
    the sweep's seeded mini-batches: (the measured time of each step (s), LAI s, mean
    hinge)."""
    import torch

    from qs.torch.layerwise import layerwise_svm

    X, y = data["train"]
    labels = torch.from_numpy(y).to(normalise.device)
    batches = _mini_batches(cfg, len(y), sweep)
    lai_s, hinges, step_s = [], [], []
    last = [_clock(normalise.device)]

    def hinge(scores, targets):
        value, spent = step_loss(scores, targets)
        lai_s.append(spent)
        return value

    def progress(value):
        now = _clock(normalise.device)
        step_s.append(now - last[0])
        last[0] = now
        hinges.append(value)
        bar.update()
        bar.set_postfix(loss=f"{np.mean(hinges):.4f}")

    result = layerwise_svm(
        model, layer, hinge, lambda b: (normalise(X[batches[b]]), labels[batches[b]]),
        len(batches), C=cfg["layerwise"]["C"], proximal=cfg["layerwise"]["proximal"],
        passes=cfg["layerwise"]["passes"], random_state=[cfg["seed"], sweep, 1],
        callback=progress)
    return step_s, sum(lai_s), result.mean_hinge


def _units(cfg, phase, n_layers):
    """The checkpointed units of a phase: epochs, or (layer-wise) layer solves, last layer
    first, `epochs` sweeps over the layers."""
    if phase == "warm_cross_entropy":
        return cfg["warm_start"]["cross_entropy_epochs"]
    if phase == "warm_hinge":
        return cfg["warm_start"]["hinge_epochs"]
    return cfg["epochs"] * (n_layers if cfg["training"] == "layerwise" else 1)


def train_phase(cfg, phase, model, data, normalise, loss_fn, ckpt, start_state, progress):
    """Train `phase` from `start_state` (a model state dict), resuming from `ckpt`; return
    the finished checkpoint (model state, history rows)."""
    import torch

    warm = phase in WARM_PHASES
    layerwise = not warm and cfg["training"] == "layerwise"
    layers = model.linear_layers()[::-1]
    units = _units(cfg, phase, len(layers))
    if warm and cfg["warm_start"]["optimizer"] == "adadelta":
        optimizer = torch.optim.Adadelta(model.parameters(), lr=cfg["warm_start"]["lr"],
                                         weight_decay=cfg["weight_decay"])
    else:
        optimizer = torch.optim.SGD(model.parameters(), lr=cfg["warm_start"]["lr"] if warm
                                    else cfg["lr"], momentum=cfg["momentum"],
                                    weight_decay=cfg["weight_decay"])
    if ckpt.get("model") is not None:
        model.load_state_dict(ckpt["model"])
        optimizer.load_state_dict(ckpt["optimizer"])
    else:
        model.load_state_dict(start_state)
        ckpt.update(history=[], step_s=[], units_done=0, model=None)
    step_loss, is_rank = _phase_loss(phase, loss_fn)
    n_batches = -(-len(data["train"][1]) // cfg["batch_size"])
    cumulative = ckpt["history"][-1] if ckpt["history"] else {"train_s": 0.0, "lai_s": 0.0,
                                                                 "steps": 0}
    for unit in range(ckpt["units_done"], units):
        model.train()
        if layerwise or (is_rank and cfg["freeze_bn"]):
            for module in model.modules():
                if isinstance(module, torch.nn.BatchNorm2d):
                    module.eval()
        what = (f"layer {len(layers) - unit % len(layers)}/{len(layers)} sweep "
                f"{unit // len(layers) + 1}" if layerwise else "epoch")
        with tqdm(total=n_batches * (cfg["layerwise"]["passes"] if layerwise else 1),
                  desc=f"{phase} {unit + 1}/{units} ({what})", unit="batch", leave=False,
                  disable=not progress) as bar:
            if layerwise:
                step_s, lai_s, loss = _svm_layer(
                    cfg, model, layers[unit % len(layers)], step_loss, data, normalise, unit,
                    bar)
            else:
                step_s, lai_s, loss = _sgd_epoch(cfg, model, optimizer, step_loss, data,
                                                 normalise, unit, bar)
        val = evaluate(model, normalise, *data["val"]) if len(data["val"][1]) else (np.nan,) * 2
        test = evaluate(model, normalise, *data["test"])
        cumulative = {"phase": phase, "unit": unit + 1, "loss": loss,
                      "train_s": cumulative["train_s"] + sum(step_s),
                      "lai_s": cumulative["lai_s"] + lai_s if is_rank else np.nan,
                      "steps": cumulative["steps"] + len(step_s),
                      "val_map": val[0], "val_ndcg": val[1], "test_map": test[0],
                      "test_ndcg": test[1]}
        ckpt.update(model=_copy(model.state_dict()), optimizer=optimizer.state_dict(),
                    units_done=unit + 1, history=[*ckpt["history"], cumulative],
                    step_s=[*ckpt.get("step_s", []), *step_s])
        _save(ckpt["path"], {k: v for k, v in ckpt.items() if k != "path"})
    if ckpt.get("model") is None:  # a phase of 0 epochs passes its start state on
        ckpt.update(model=start_state, optimizer=optimizer.state_dict(), units_done=0)
    return ckpt


def warm_up_lai(loss_fn, methods):
    """One call per method on small scores, so numba compiles (or loads) its kernels here."""
    import torch

    scores = torch.randn(10, 40, generator=torch.Generator().manual_seed(0))
    labels = torch.arange(40).remainder(4).eq(0).long().repeat(10, 1)
    for name in methods:
        loss, inference = METHODS[name]
        loss_fn(scores, labels, loss=loss, method=inference, reduction="mean")


def prepare(cfg):
    """The config as run: `device` auto made concrete, torch's threads set."""
    import torch

    if cfg["threads"] is not None:
        torch.set_num_threads(cfg["threads"])
    return {**cfg, "device": pick_device(cfg["device"], torch.cuda.is_available())}


def settings(cfg, data):
    """What every phase shares; each phase's checkpoint also keeps its own (_settings)."""
    keys = ("seed", "split", "widths", "batch_size", "warm_start", "momentum",
            "weight_decay", "epochs", "training", "layerwise", "lr", "freeze_bn")
    return {"data": data["note"], "data_sha256": None, **{k: cfg[k] for k in keys}}


def units(cfg, data):
    """The warm start's two phases, then one unit per selected method, each from the warm
    start's final weights."""
    return [(phase,) for phase in (*WARM_PHASES, *selected_methods(METHODS, cfg))]


def warm_up(cfg, units):
    """Compile (or load) the LAI kernels of the methods left."""
    warm_up_lai(_rank_hinge_loss(), [u[0] for u in units if u[0] not in WARM_PHASES])


def _network(run):
    """The run's PL-CNN, seeded initial weights, normaliser and loss, built once."""
    if "model" not in run.cache:
        import torch

        from qs.nets import PLCNN

        torch.manual_seed(run.cfg["seed"])
        model = PLCNN(tuple(run.cfg["widths"])).to(run.cfg["device"])
        run.cache.update(model=model, init=_copy(model.state_dict()),
                         normalise=Normaliser(run.data["train"][0], run.cfg["device"]),
                         loss_fn=_rank_hinge_loss())
    return run.cache["model"]


def run_unit(run, unit):
    """Train one phase from its start (resuming from its checkpoint): the record holds its
    history rows and test metrics (per class for a method, the means for the warm start)."""
    phase, = unit
    ckpt = _train(run, phase)
    mean_ap, mean_ndcg, ap, nd = evaluate(model_with(run.cache["model"], ckpt["model"]),
                                          run.cache["normalise"], *run.data["test"])
    per_class = [] if phase in WARM_PHASES else [
        {"method": phase, "class": c, "test_ap": ap[c], "test_ndcg": nd[c]} for c in ap]
    return {"phase": phase, "history": ckpt["history"], "step_s": ckpt.get("step_s", []),
            "test": [mean_ap, mean_ndcg], "per_class": per_class}


def _train(run, phase):
    """The finished checkpoint of `phase`, trained (or resumed, or read when finished) from
    its start: the seeded initial weights, or the phase before's final weights (the warm
    start's for every method)."""
    if phase in run.cache:
        return run.cache[phase]
    cfg, data, model = run.cfg, run.data, _network(run)
    if phase == WARM_PHASES[0]:
        start = run.cache["init"]
    else:
        start = _train(run, WARM_PHASES[0] if phase == WARM_PHASES[1] else WARM_PHASES[1])
        start = start["model"]
    path = run.out / "checkpoints" / f"{phase}.pt"
    phase_settings = {**_settings(cfg, data["note"], phase), "start": _digest(start)}
    forced = cfg["force"] and phase not in WARM_PHASES
    ckpt = None if forced else _load(path, phase_settings)
    ckpt = {"settings": phase_settings, **(ckpt or {}), "path": path}
    run.cache[phase] = train_phase(cfg, phase, model, data, run.cache["normalise"],
                                   run.cache["loss_fn"], ckpt, start, run.progress)
    return run.cache[phase]


def write(run, records):
    """results.csv, history.csv, per_class.csv, table.md and the figure."""
    from qs.nets import n_parameters

    cfg, note = run.cfg, run.data["note"]
    history = pd.DataFrame([row for r in records for row in r["history"]])
    per_class = pd.DataFrame([row for r in records for row in r["per_class"]])
    warm_test = next(r["test"] for r in records if r["phase"] == WARM_PHASES[-1])
    methods = selected_methods(METHODS, cfg)
    results = results_frame(history, methods, {r["phase"]: r["step_s"] for r in records})
    for name, frame in (("results.csv", results), ("history.csv", history),
                        ("per_class.csv", per_class)):
        with atomic_path(run.out / name) as tmp:
            frame.to_csv(tmp, index=False)
    text = summary(cfg, note, results, history, warm_test, n_parameters(_network(run)))
    write_text(run.out / "table.md", text)
    save_figure(plot(history, methods, warm_test, _source(note)), run.out / "figure")


def _source(note):
    """The figure's name of the data."""
    return "digits-as-CIFAR (not CIFAR-10)" if is_digits(note) else "CIFAR-10"


def redraw(run_dir, kind="tables"):
    """Redraw figure.png and .pdf of a run from its history.csv and results.csv; return their
    paths."""
    run_dir = Path(run_dir)
    history = read_csv(run_dir / "history.csv", ["phase", "train_s", "test_map", "test_ndcg"])
    methods = list(read_csv(run_dir / "results.csv", ["method"])["method"])
    warm = history[history.phase.isin(WARM_PHASES)]
    if warm.empty or not methods:
        raise ValueError(f"{run_dir / 'history.csv'} lacks the warm start's or the methods' "
                         "rows")
    warm_test = (warm.test_map.iloc[-1], warm.test_ndcg.iloc[-1])
    fig = plot(history, methods, warm_test, _source(run_data_note(run_dir)))
    return save_figure(fig, run_dir / "figure")


def model_with(model, state):
    """`model` holding the weights `state`."""
    model.load_state_dict(state)
    return model


# ---------------------------------------------------------------------------- outputs

def results_frame(history, methods, step_s):
    """One row per method: its final epoch's metrics and cumulative times, and the median
    and quartiles of its measured step times (`step_s`: phase -> each step's seconds)."""
    last = history.groupby("phase", sort=False).tail(1).set_index("phase")
    rows = []
    for name in methods:
        loss, inference = METHODS[name]
        r = last.loc[name]
        rows.append({"method": name, "loss": loss, "inference": inference,
                     "test_map": r.test_map, "test_ndcg": r.test_ndcg, "val_map": r.val_map,
                     "val_ndcg": r.val_ndcg, "units": int(r.unit), "steps": int(r.steps),
                     "train_s": r.train_s, "lai_s": r.lai_s,
                     **dict(zip(("step_ms_q1", "step_ms_median", "step_ms_q3"),
                                1e3 * np.quantile(step_s[name] or [np.nan],
                                                  [0.25, 0.5, 0.75]))),
                     "lai_ms_per_step": 1e3 * r.lai_s / r.steps,
                     "paper_map": PAPER_MAP.get(loss), "paper_ndcg": PAPER_NDCG.get(loss),
                     "paper_train_h": PAPER_HOURS.get(name)})
    return pd.DataFrame(rows)


def _cell(value, spec):
    return "-" if value is None or (isinstance(value, float) and np.isnan(value)) \
        else format(value, spec)


def _training_text(cfg):
    if cfg["training"] == "layerwise":
        lw = cfg["layerwise"]
        return (f"{cfg['epochs']} sweep(s) of the layer-wise SVM training over the 7 layers, "
                f"last first (block-coordinate Frank-Wolfe, {lw['passes']} pass(es) per layer, "
                f"C {lw['C']:g}, proximal weight {lw['proximal']:g}, batch norm frozen)")
    return (f"{cfg['epochs']} epochs of end-to-end SGD on its structured hinge (lr "
            f"{cfg['lr']:g}, momentum {cfg['momentum']:g}, weight decay "
            f"{cfg['weight_decay']:g}, batch norm {'frozen' if cfg['freeze_bn'] else 'trained'})")


def summary(cfg, note, results, history, warm_test, n_params):
    """table.md: the data, the settings, test metrics and times beside the paper's."""
    ours = "ours (digits-as-CIFAR, not CIFAR-10)" if is_digits(note) else "ours (CIFAR-10)"
    warm = history[history.phase.isin(WARM_PHASES)]
    warm_s = float(warm.groupby("phase").train_s.max().sum()) if len(warm) else 0.0
    metrics = [[r.method, r.loss, r.inference, _cell(100 * r.test_map, ".2f"),
                _cell(r.paper_map, ".2f"), _cell(100 * r.test_ndcg, ".2f"),
                _cell(r.paper_ndcg, ".2f")] for r in results.itertuples()]
    metrics.insert(0, ["warm start", "-", "-", _cell(100 * warm_test[0], ".2f"), "-",
                       _cell(100 * warm_test[1], ".2f"), "-"])
    times = [[r.method, r.inference, r.steps, _cell(r.train_s, ".2f"),
              f"{r.step_ms_median:.1f} [{r.step_ms_q1:.1f}, {r.step_ms_q3:.1f}]",
              _cell(r.lai_s, ".3f"),
              _cell(100 * r.lai_s / r.train_s, ".2f"), _cell(r.lai_ms_per_step, ".3f"),
              _cell(r.paper_train_h, ".3f")] for r in results.itertuples()]
    ws = cfg["warm_start"]
    return "\n\n".join([
        f"# CIFAR-10 experiment ({CVPR2018}, Section 4.3): 0-1 vs AP vs NDCG training of "
        "the PL-CNN",
        f"Data: {note}." + (" **Not the paper's data**: the paper's numbers stand beside ours "
                            "for orientation only." if is_digits(note) else ""),
        (f"Network: PL-CNN, widths {cfg['widths']}, {n_params:,} parameters. Warm start: "
         f"{ws['cross_entropy_epochs']} cross-entropy + {ws['hinge_epochs']} multi-class hinge "
         f"epochs of {WARM_OPTIMIZERS[ws['optimizer']]} (lr {ws['lr']:g}); then per method "
         f"{_training_text(cfg)}, one "
         "ranking per class per mini-batch of "
         f"{cfg['batch_size']}. The paper trains layer-wise on CIFAR-10; its numbers are in "
         "the `paper` columns."),
        "## Test mean AP and mean NDCG over the 10 classes (%)",
        markdown_table(["method", "loss", "LAI", f"mAP {ours}", "mAP paper",
                        f"NDCG {ours}", "NDCG paper"], metrics),
        "## Training time per method",
        (f"Steps only (evaluation apart), this run's hardware; the warm start took "
         f"{warm_s:.2f} s more. `train s`: the sum of the measured times of the steps of "
         "one training (one measurement); `step ms`: the median step time, its quartiles "
         "in brackets. LAI time: inside `rank_hinge_loss` (exact LAI of the 10 "
         "queries of each mini-batch), numba compiled beforehand. The paper's hours are for "
         "its layer-wise training on CIFAR-10 with a GPU."),
        markdown_table(["method", "LAI", "steps", "train s", "step ms", "LAI s",
                        "LAI % of train",
                        "LAI ms/step", "paper train h"], times),
    ]) + "\n"


def plot(history, methods, warm_test, ours):
    """Test mAP against the summed measured step times per method, from the warm start's mAP.

    Methods whose mAP curves are identical (exact LAI methods of one loss train the same
    weights) share a colour and the legend says so; each keeps its own step times."""
    fig = Figure(figsize=(6.4, 4.4))
    ax = fig.add_subplot()
    curves = {name: history[history.phase == name] for name in methods}
    groups = {}
    for name, rows in curves.items():
        key = tuple(rows.test_map.round(12))
        groups.setdefault(key, []).append(name)
    for k, names in enumerate(groups.values()):
        for i, name in enumerate(names):
            rows = curves[name]
            label = (f"{' = '.join(names)} (identical mAP)" if i == 0 and len(names) > 1
                     else name if i == 0 else f"{name} (its own step times)")
            ax.plot([0.0, *rows.train_s], [100 * warm_test[0], *(100 * rows.test_map)],
                    marker="os^"[i % 3], linestyle=("-", "--", ":")[i % 3], color=f"C{k}",
                    label=label)
    ax.set_xlabel("training time after the warm start: summed measured step times (s)")
    ax.set_ylabel("test mean AP (%)")
    ax.set_title(f"PL-CNN, {ours}", fontsize=10)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    return fig


def report(run_dir):
    """What `qsrank train` prints for this experiment: the run's table.md."""
    return (Path(run_dir) / "table.md").read_text(encoding="utf-8")


SPEC = Experiment(name=EXPERIMENT, schema=Config, load_data=load_data, settings=settings,
                  units=units, run_unit=run_unit, write=write, warm_up=warm_up,
                  prepare=prepare, unit_label="phase")
