"""The experiment's units (the warm start's two phases, then one per method, each trained by
`phases`), the outputs of a run, and its declaration (`SPEC`)."""

import pandas as pd

from qsrank.pipelines._device import prepare, torch_threads
from qsrank.pipelines._images import Normaliser, cifar_split
from qsrank.pipelines._io import save_figure, write_csv, write_text
from qsrank.pipelines._methods import selected_methods
from qsrank.pipelines._runner import Experiment
from qsrank.pipelines.cifar10.config import EXPERIMENT, METHODS, WARM_PHASES, Config
from qsrank.pipelines.cifar10.figures import data_name, plot
from qsrank.pipelines.cifar10.phases import (
    METHOD_KEYS,
    SHARED_KEYS,
    WARM_KEYS,
    checkpoint_settings,
    copy_state,
    evaluate,
    load_checkpoint,
    state_digest,
    train_phase,
    warm_up_lai,
)
from qsrank.pipelines.cifar10.tables import results_frame, summary


def load_data(cfg):
    """{'train', 'val', 'test'}: (uint8 images, labels), the seeded split of the configured
    sizes, and 'note': where the images came from."""
    return cifar_split(cfg["data"], cfg["split"], cfg["seed"])


def settings(cfg, data):
    """What every phase shares; each phase's checkpoint also keeps its own."""
    keys = SHARED_KEYS + WARM_KEYS + METHOD_KEYS
    return {"data": data["note"], "data_sha256": None, **{k: cfg[k] for k in keys}}


def units(cfg, data):
    """The warm start's two phases, then one unit per selected method, each from the warm
    start's final weights."""
    return [(phase,) for phase in (*WARM_PHASES, *selected_methods(METHODS, cfg))]


def warm_up(cfg, units):
    """Compile (or load) the LAI kernels of the methods left."""
    warm_up_lai([u[0] for u in units if u[0] not in WARM_PHASES])


def _network(run):
    """The run's PL-CNN, seeded initial weights, normaliser and loss, built once."""
    if "model" not in run.cache:
        import torch

        from qs.nets import PLCNN

        torch.manual_seed(run.cfg["seed"])
        model = PLCNN(tuple(run.cfg["widths"])).to(run.cfg["device"])
        run.cache.update(
            model=model,
            init=copy_state(model.state_dict()),
            normalise=Normaliser(run.data["train"][0], run.cfg["device"]),
        )
    return run.cache["model"]


def run_unit(run, unit):
    """Train one phase from its start (resuming from its checkpoint): the record holds its
    history rows and test metrics (per class for a method, the means for the warm start)."""
    (phase,) = unit
    ckpt = _train(run, phase)
    model = run.cache["model"]
    model.load_state_dict(ckpt["model"])
    mean_ap, mean_ndcg, ap, nd = evaluate(model, run.cache["normalise"], *run.data["test"])
    per_class = (
        []
        if phase in WARM_PHASES
        else [{"method": phase, "class": c, "test_ap": ap[c], "test_ndcg": nd[c]} for c in ap]
    )
    return {
        "phase": phase,
        "history": ckpt["history"],
        "step_s": ckpt.get("step_s", []),
        "test": [mean_ap, mean_ndcg],
        "per_class": per_class,
    }


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
    phase_settings = {**checkpoint_settings(cfg, data["note"], phase), "start": state_digest(start)}
    forced = cfg["force"] and phase not in WARM_PHASES
    ckpt = None if forced else load_checkpoint(path, phase_settings)
    ckpt = {"settings": phase_settings, **(ckpt or {}), "path": path}
    run.cache[phase] = train_phase(
        cfg, phase, model, data, run.cache["normalise"], ckpt, start, run.progress
    )
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
    for name, frame in (
        ("results.csv", results),
        ("history.csv", history),
        ("per_class.csv", per_class),
    ):
        write_csv(run.out / name, frame)
    text = summary(cfg, note, results, history, warm_test, n_parameters(_network(run)))
    write_text(run.out / "table.md", text)
    save_figure(plot(history, methods, warm_test, data_name(note)), run.out / "figure")


SPEC = Experiment(
    name=EXPERIMENT,
    schema=Config,
    load_data=load_data,
    settings=settings,
    units=units,
    run_unit=run_unit,
    write=write,
    warm_up=warm_up,
    prepare=prepare,
    session=torch_threads,
    unit_label="phase",
)
