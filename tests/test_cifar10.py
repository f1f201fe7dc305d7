"""CIFAR-10: the batch loaders (both versions, each corruption), digits-as-CIFAR, the PL-CNN,
and a tiny run of the pipeline through run() and the CLI, resumed."""

import pickle

import numpy as np
import pytest

from qs.data.cifar10 import (
    CLASS_NAMES,
    DIGITS_NOTE,
    digits_as_cifar,
    load_cifar10,
    read_binary_batch,
    read_python_batch,
)
from qsrank.pipelines import _runner
from qsrank.pipelines._device import pick_device
from qsrank.pipelines._images import Normaliser

N_PER_BATCH = 6


def _batch(seed, n=N_PER_BATCH):
    rng = np.random.default_rng(seed)
    return rng.integers(0, 256, (n, 3072), dtype=np.uint8), rng.integers(0, 10, n)


def write_python(folder, n=N_PER_BATCH):
    """A tiny python-version CIFAR-10 folder; returns {batch name: (pixels, labels)}."""
    folder.mkdir(parents=True, exist_ok=True)
    batches = {}
    for k, name in enumerate([f"data_batch_{i}" for i in range(1, 6)] + ["test_batch"]):
        pixels, labels = batches[name] = _batch(k, n)
        record = {
            b"batch_label": name.encode(),
            b"data": pixels,
            b"labels": [int(v) for v in labels],
            b"filenames": [b"x.png"] * n,
        }
        (folder / name).write_bytes(pickle.dumps(record, protocol=2))
    meta = {b"label_names": [c.encode() for c in CLASS_NAMES], b"num_vis": 3072}
    (folder / "batches.meta").write_bytes(pickle.dumps(meta))
    return batches


def write_binary(folder, n=N_PER_BATCH):
    """A tiny binary-version CIFAR-10 folder; returns {batch name: (pixels, labels)}."""
    folder.mkdir(parents=True, exist_ok=True)
    batches = {}
    for k, name in enumerate([f"data_batch_{i}" for i in range(1, 6)] + ["test_batch"]):
        pixels, labels = batches[name] = _batch(k, n)
        records = np.concatenate([labels.astype(np.uint8)[:, None], pixels], axis=1)
        (folder / f"{name}.bin").write_bytes(records.tobytes())
    (folder / "batches.meta.txt").write_text("\n".join(CLASS_NAMES) + "\n\n")
    return batches


@pytest.mark.parametrize("write", [write_python, write_binary])
def test_both_versions_load_the_same_images(tmp_path, write):
    batches = write(tmp_path / "cifar")
    data = load_cifar10(tmp_path / "cifar")
    pixels = np.concatenate([batches[f"data_batch_{i}"][0] for i in range(1, 6)])
    assert data.X_train.shape == (5 * N_PER_BATCH, 3, 32, 32)
    assert data.X_train.dtype == np.uint8 and data.y_train.dtype == np.int64
    np.testing.assert_array_equal(data.X_train.reshape(-1, 3072), pixels)
    # channel-major: the first 1024 bytes are the red plane, row by row
    np.testing.assert_array_equal(data.X_test[0, 0, 0], batches["test_batch"][0][0, :32])
    np.testing.assert_array_equal(data.X_test[0, 1, 0], batches["test_batch"][0][0, 1024:1056])
    np.testing.assert_array_equal(data.y_test, batches["test_batch"][1])
    assert data.class_names == CLASS_NAMES
    assert "CIFAR-10" in data.source


@pytest.fixture(params=[write_python, write_binary])
def folder(request, tmp_path):
    request.param(tmp_path)
    return tmp_path


def test_parent_folder_of_the_batches_is_found(tmp_path):
    write_binary(tmp_path / "cifar-10-batches-bin")
    assert load_cifar10(tmp_path).X_test.shape == (N_PER_BATCH, 3, 32, 32)


def test_missing_directory_and_missing_batches(folder):
    with pytest.raises(ValueError, match="does not exist"):
        load_cifar10(folder / "nowhere")
    with pytest.raises(ValueError, match="no CIFAR-10 batches found"):
        load_cifar10(folder.parent)
    for path in folder.glob("data_batch_3*"):
        path.unlink()
    with pytest.raises(ValueError, match=r"missing CIFAR-10 batch\(es\) data_batch_3"):
        load_cifar10(folder)


def test_truncated_binary_batch(tmp_path):
    write_binary(tmp_path)
    path = tmp_path / "data_batch_2.bin"
    path.write_bytes(path.read_bytes()[:-100])
    with pytest.raises(ValueError, match=r"data_batch_2\.bin: .* not a whole number of 3073"):
        load_cifar10(tmp_path)
    path.write_bytes(b"")
    with pytest.raises(ValueError, match="data_batch_2.bin"):
        read_binary_batch(path)


def test_binary_label_out_of_range(tmp_path):
    write_binary(tmp_path)
    path = tmp_path / "test_batch.bin"
    raw = bytearray(path.read_bytes())
    raw[3073] = 10  # the second record's label byte
    path.write_bytes(bytes(raw))
    with pytest.raises(
        ValueError,
        match=r"test_batch\.bin: labels must be in 0..9; got 10 "
        r"at record 1",
    ):
        load_cifar10(tmp_path)


def _rewrite(path, changes):
    record = pickle.loads(path.read_bytes())
    record.update(changes)
    path.write_bytes(pickle.dumps(record))


def test_python_batch_corruptions(tmp_path):
    batches = write_python(tmp_path)
    path = tmp_path / "data_batch_1"
    pixels, labels = batches["data_batch_1"]
    _rewrite(path, {b"data": pixels[:, :3000]})
    with pytest.raises(ValueError, match=r"data_batch_1: expected data of shape \(n, 3072\)"):
        load_cifar10(tmp_path)
    _rewrite(path, {b"data": pixels, b"labels": [int(v) for v in labels[:-1]]})
    with pytest.raises(ValueError, match="data_batch_1: expected data of shape"):
        read_python_batch(path)
    _rewrite(path, {b"labels": [-1] + [int(v) for v in labels[1:]]})
    with pytest.raises(ValueError, match="data_batch_1: labels must be in 0..9; got -1"):
        read_python_batch(path)
    _rewrite(path, {b"labels": [int(v) for v in labels], b"data": pixels.astype(np.float32)})
    with pytest.raises(ValueError, match="data_batch_1: data must be uint8"):
        read_python_batch(path)
    path.write_bytes(pickle.dumps({b"data": pixels})[:40])
    with pytest.raises(ValueError, match="data_batch_1: not a readable CIFAR-10 python batch"):
        read_python_batch(path)
    path.write_bytes(pickle.dumps([1, 2]))
    with pytest.raises(ValueError, match="expected a pickled dict"):
        read_python_batch(path)


class _Evil:
    def __reduce__(self):
        return (print, ("unpickled a function",))


def test_python_batch_builds_no_foreign_object(tmp_path, capsys):
    path = tmp_path / "test_batch"
    path.write_bytes(pickle.dumps({b"data": _Evil(), b"labels": [0]}))
    with pytest.raises(ValueError, match="global builtins.print is not allowed"):
        read_python_batch(path)
    assert "unpickled" not in capsys.readouterr().out


def test_bad_meta_names(tmp_path):
    write_binary(tmp_path)
    (tmp_path / "batches.meta.txt").write_text("a\nb\n")
    with pytest.raises(ValueError, match="batches.meta.txt: expected 10 class names"):
        load_cifar10(tmp_path)


def test_digits_as_cifar_is_deterministic_and_labelled():
    a, b = digits_as_cifar(400, seed=0), digits_as_cifar(400, seed=0)
    assert a.X_train.shape == (1397, 3, 32, 32) and a.X_test.shape == (400, 3, 32, 32)
    np.testing.assert_array_equal(a.X_train, b.X_train)
    np.testing.assert_array_equal(a.X_train[:, 0], a.X_train[:, 2])  # grey in 3 channels
    np.testing.assert_array_equal(a.X_train[:, :, ::4, ::4].repeat(4, 2).repeat(4, 3), a.X_train)
    assert set(np.unique(a.y_test)) == set(range(10))
    assert a.source.startswith(DIGITS_NOTE) and "not CIFAR-10" in a.source
    assert a.X_train.max() == 255


# ---------------------------------------------------------------------------- the network


def test_plcnn_parameters_at_the_papers_width_and_output_shape():
    torch = pytest.importorskip("torch")
    from qs.nets import PLCNN, n_parameters

    net = PLCNN()
    assert n_parameters(net) == 1_188_170  # the paper's "about 1.19M"
    assert net(torch.zeros(2, 3, 32, 32)).shape == (2, 10)
    tiny = PLCNN((2, 3, 4))
    assert tiny.classifier.in_features == 4 * 4 * 4
    assert tiny(torch.zeros(5, 3, 32, 32)).shape == (5, 10)


def test_fixed_pattern_forward_is_the_forward_and_affine_in_a_layers_weights():
    torch = pytest.importorskip("torch")
    from qs.nets import PLCNN

    torch.manual_seed(0)
    net = PLCNN((3, 4, 5)).eval()
    x = torch.randn(6, 3, 32, 32)
    pattern = net.patterns(x)
    with torch.no_grad():
        torch.testing.assert_close(net.forward_fixed(x, pattern), net(x), rtol=0, atol=1e-6)
        layer = net.linear_layers()[1]
        w0, d = layer.weight.clone(), torch.randn_like(layer.weight)

        def scores(t):
            layer.weight.copy_(w0 + t * d)
            return net.forward_fixed(x, pattern)

        s0, s1, s3 = scores(0.0), scores(1.0), scores(3.0)
        torch.testing.assert_close(s3 - s0, 3 * (s1 - s0), rtol=1e-4, atol=1e-4)
        assert not torch.allclose(net(x), s3)  # the true forward left that pattern


# ---------------------------------------------------------------------------- the pipeline

TINY = {
    "split": {"train": 40, "val": 10, "test": 40},
    "widths": [2, 3, 4],
    "batch_size": 20,
    "threads": 1,
    "warm_start": {"cross_entropy_epochs": 1, "hinge_epochs": 1},
    "epochs": 1,
    "methods": ["zero_one", "ap_yue", "ap_qs", "ndcg_qs"],
}


def _config(cifar10, **overrides):
    from qsrank.pipelines import _runner

    return _runner.load_config(cifar10.SPEC, **overrides)


def _run(cifar10, cfg, out, progress=False):
    from qsrank.pipelines import _runner

    return _runner.run(cifar10.SPEC, cfg, out, progress=progress)


def _pipeline():
    pytest.importorskip("torch")
    pytest.importorskip("qs.torch")
    from qsrank.pipelines import cifar10

    return cifar10


@pytest.fixture(scope="module")
def tiny_run(tmp_path_factory):
    cifar10 = _pipeline()
    out = tmp_path_factory.mktemp("cifar10") / "run"
    return _run(cifar10, _config(cifar10, **TINY), out, progress=False)


def test_run_writes_tables_figure_and_provenance(tiny_run):
    import json

    import pandas as pd

    cifar10 = _pipeline()
    names = {p.name for p in tiny_run.iterdir()}
    assert names == {
        "results.csv",
        "history.csv",
        "per_class.csv",
        "table.md",
        "figure.png",
        "figure.pdf",
        "config.yaml",
        "provenance.json",
        "checkpoints",
        "qsrank-run.json",
        ".qsrank-run.lock",
        "runs",
    }
    results = pd.read_csv(tiny_run / "results.csv")
    assert list(results.method) == TINY["methods"]
    assert ((results.test_map > 0) & (results.test_map <= 1)).all()
    assert (results.lai_s > 0).all() and (results.lai_s < results.train_s).all()
    # Yue's and the QS LAI give the same subgradients: the same network, other times
    ap = results.set_index("method").loc[["ap_yue", "ap_qs"]]
    assert ap.test_map.iloc[0] == ap.test_map.iloc[1]
    assert ap.test_ndcg.iloc[0] == ap.test_ndcg.iloc[1]
    per_class = pd.read_csv(tiny_run / "per_class.csv")
    mean = per_class[per_class.method == "ndcg_qs"].test_ndcg.mean()
    assert mean == pytest.approx(results.set_index("method").test_ndcg["ndcg_qs"])
    table = _runner.report(cifar10.SPEC, tiny_run)
    assert "not CIFAR-10" in table and "84.22" in table and "1.974" in table
    record = json.loads((tiny_run / "provenance.json").read_text())
    assert record["data"].startswith("digits-as-CIFAR (not CIFAR-10)")
    assert record["packages"]["torch"] and record["seed"] == 0
    assert sorted(p.name for p in (tiny_run / "checkpoints").iterdir()) == sorted(
        f"{p}.pt" for p in ["warm_cross_entropy", "warm_hinge", *TINY["methods"]]
    )


def test_times_are_the_summed_step_times_and_identical_curves_are_said_so(tiny_run):
    import json

    import pandas as pd

    cifar10 = _pipeline()
    results = pd.read_csv(tiny_run / "results.csv").set_index("method")
    for method in TINY["methods"]:
        step_s = json.loads((tiny_run / "runs" / f"{method}.json").read_text())["step_s"]
        assert len(step_s) == results.steps[method]
        assert results.train_s[method] == pytest.approx(sum(step_s), rel=1e-9)
        assert results.step_ms_median[method] == pytest.approx(1e3 * np.median(step_s))
        assert (
            results.step_ms_q1[method]
            <= results.step_ms_median[method]
            <= results.step_ms_q3[method]
        )
    assert "`train s`: the sum of the measured times of the steps" in _runner.report(
        cifar10.SPEC, tiny_run
    )
    history = pd.read_csv(tiny_run / "history.csv")
    fig = cifar10.plot(history, TINY["methods"], (0.9, 0.95), "digits-as-CIFAR")
    labels = fig.axes[0].get_legend_handles_labels()[1]
    # exact LAI: Yue's and QS train the same network (on the tiny data other losses may too)
    assert (
        any(
            label.startswith("ap_yue = ap_qs") and label.endswith("(identical mAP)")
            for label in labels
        )
        and "ap_qs (its own step times)" in labels
    )
    assert len(labels) == len(TINY["methods"])  # no curve hidden
    assert "summed measured step times" in fig.axes[0].get_xlabel()


def test_plot_redraws_the_same_figure(tiny_run, tmp_path):
    import shutil

    from click.testing import CliRunner

    from qsrank.main import main

    copy = tmp_path / "run"
    shutil.copytree(
        tiny_run, copy, ignore=shutil.ignore_patterns(".qsrank-run.lock", "checkpoints", "figure.*")
    )
    result = CliRunner().invoke(main, ["plot", str(copy)])
    assert result.exit_code == 0, result.output
    assert (copy / "figure.png").read_bytes() == (tiny_run / "figure.png").read_bytes()


def test_warm_start_is_adadelta_as_in_the_paper(tiny_run):
    import torch

    for phase in ("warm_cross_entropy", "warm_hinge"):
        state = torch.load(tiny_run / "checkpoints" / f"{phase}.pt")["optimizer"]["state"]
        assert {"square_avg", "acc_delta"} <= set(state[0])  # Adadelta's running averages
    method = torch.load(tiny_run / "checkpoints" / "ap_qs.pt")["optimizer"]["state"]
    assert set(method[0]) == {"momentum_buffer"}  # the methods' SGD


def test_device_auto_picks_cuda_only_when_there_is_one():
    cifar10 = _pipeline()
    assert pick_device("auto", False) == "cpu"
    assert pick_device("auto", True) == "cuda"
    assert pick_device("cpu", True) == "cpu"
    with pytest.raises(ValueError, match="device is cuda, but torch sees no CUDA device"):
        pick_device("cuda", False)
    assert _config(cifar10, preset="full", data="x")["device"] == "auto"
    # the preset lies under the config, key by key
    cfg = _config(cifar10, preset="full", data="x", split={"train": 5})
    assert cfg["split"] == {"train": 5, "val": 5000, "test": 10000}
    assert cfg["widths"] == [64, 128, 256] and cfg["warm_start"]["lr"] == 1.0


def test_metrics_match_a_recomputation_from_the_checkpoint(tiny_run):
    import pandas as pd
    import torch
    from sklearn.metrics import average_precision_score

    from qs.nets import PLCNN

    cifar10 = _pipeline()
    cfg = _config(cifar10, **TINY)
    data = cifar10.load_data(cfg)
    net = PLCNN(tuple(TINY["widths"]))
    net.load_state_dict(torch.load(tiny_run / "checkpoints" / "ap_qs.pt")["model"])
    net.eval()
    with torch.no_grad():
        scores = net(Normaliser(data["train"][0])(data["test"][0])).double().numpy()
    y = data["test"][1]
    expected = np.mean([average_precision_score(y == c, scores[:, c]) for c in range(10)])
    results = pd.read_csv(tiny_run / "results.csv").set_index("method")
    assert results.test_map["ap_qs"] == pytest.approx(expected, abs=1e-6)


@pytest.fixture
def no_figure(monkeypatch):
    """Runs whose figure no test reads skip drawing it (half of a tiny run's time)."""
    from qsrank.pipelines.cifar10 import train

    monkeypatch.setattr(train, "save_figure", lambda fig, path: None)


def test_resume_skips_finished_methods_and_force_retrains_them(tiny_run, no_figure):
    cifar10 = _pipeline()
    ckpts = tiny_run / "checkpoints"
    stamp = {p.name: p.stat().st_mtime_ns for p in ckpts.iterdir()}
    (ckpts / "ap_qs.pt").unlink()
    (tiny_run / "runs" / "ap_qs.json").unlink()
    _run(cifar10, _config(cifar10, **TINY), tiny_run, progress=False)
    again = {p.name: p.stat().st_mtime_ns for p in ckpts.iterdir()}
    assert {k for k in again if again[k] != stamp.get(k)} == {"ap_qs.pt"}
    _run(cifar10, _config(cifar10, **TINY, force=True, inference="yue"), tiny_run, progress=False)
    forced = {p.name: p.stat().st_mtime_ns for p in ckpts.iterdir()}
    assert {k for k in forced if forced[k] != again[k]} == {"ap_yue.pt"}
    _run(
        cifar10,
        _config(cifar10, **{**TINY, "lr": 0.02, "methods": ["zero_one"]}),
        tiny_run,
        progress=False,
    )  # a method's setting changed: the warm start is kept
    changed = {p.name: p.stat().st_mtime_ns for p in ckpts.iterdir()}
    assert {k for k in changed if changed[k] != forced[k]} == {"zero_one.pt"}


def test_cli_trains_layerwise_on_cifar10_binary_batches(tmp_path, no_figure):
    import pandas as pd
    import yaml
    from click.testing import CliRunner

    _pipeline()
    from qsrank.main import main

    write_binary(tmp_path / "cifar-10-batches-bin", n=16)
    config = tmp_path / "cifar10.yaml"
    small = {
        **TINY,
        "split": {"train": 40, "val": 10, "test": 16},
        "methods": ["ndcg_chakrabarti"],
        "training": "layerwise",
    }
    config.write_text(yaml.safe_dump({"experiment": "cifar10", "data": str(tmp_path), **small}))
    out = tmp_path / "run"
    result = CliRunner().invoke(main, ["train", "--config", str(config), "--out", str(out)])
    assert result.exit_code == 0, result.output
    assert "ours (CIFAR-10)" in result.output and "ndcg_chakrabarti" in result.output
    assert "CIFAR-10 binary batches" in (out / "provenance.json").read_text()
    history = pd.read_csv(out / "history.csv")  # layer-wise: one row per layer solved
    assert list(history[history.phase == "ndcg_chakrabarti"].unit) == list(range(1, 8))
    (tmp_path / "cifar-10-batches-bin" / "data_batch_4.bin").unlink()
    result = CliRunner().invoke(main, ["train", "--config", str(config), "--out", str(out)])
    assert result.exit_code == 1
    assert "missing CIFAR-10 batch(es) data_batch_4.bin" in result.output


@pytest.mark.parametrize(
    ("config", "message"),
    [
        ({"epoch": 2}, "^unknown config key 'epoch'; allowed keys: experiment, preset, seed"),
        ({"preset": "full"}, "^preset full is the paper's setting on real CIFAR-10"),
        ({"preset": "huge"}, "^preset: expected one of default, full; got 'huge'$"),
        (
            {"widths": [64, 128]},
            r"^widths: expected a list of 3 or more; got \[64, 128\]$",
        ),
        (
            {"widths": [64, 0, 8]},
            "^widths.1: expected a value >= 1; got 0$",
        ),
        ({"split": {"train": 1000, "val": 500}}, "split.train \\+ split.val is 1500"),
        (
            {"methods": ["ap_fast"]},
            "^methods.0: expected one of zero_one, ap_yue, .*; got 'ap_fast'$",
        ),
        ({"methods": ["ap_qs"], "loss": "ndcg"}, "^no method of \\['ap_qs'\\] has loss 'ndcg'$"),
        ({"warm_start": {"lr": 0}}, "^warm_start.lr: expected a value > 0; got 0$"),
        ({"data": 3}, "^data: expected a string; got 3$"),
        ({"device": "tpu"}, "^device: expected one of cpu, cuda, auto; got 'tpu'$"),
        ({"warm_start": {"optimizer": "adam"}}, "^warm_start.optimizer: expected one of adadelta"),
    ],
)
def test_bad_configs(config, message):
    from qsrank.pipelines import cifar10

    with pytest.raises(ValueError, match=message):
        cifar10.load_data(_config(cifar10, **config))


def test_data_folder_without_batches(tmp_path):
    from qsrank.pipelines import cifar10

    with pytest.raises(ValueError, match="no CIFAR-10 batches found"):
        cifar10.load_data(_config(cifar10, data=str(tmp_path)))
    write_python(tmp_path, n=4)
    with pytest.raises(
        ValueError, match="split.train \\+ split.val is 1397; the training images number 20"
    ):
        cifar10.load_data(_config(cifar10, data=str(tmp_path), split={"test": 4}))


def test_layerwise_svm_lowers_its_layers_objective():
    """One layer's BCFW solve ends below the objective it started at (u = 0), evaluated with
    the activation pattern held fixed, as the solver sees it."""
    import torch
    from torch.nn.utils import parameters_to_vector
    from tqdm import tqdm

    from qs.nets import PLCNN

    cifar10 = _pipeline()
    from qsrank.pipelines.cifar10 import phases

    cfg = _config(
        cifar10,
        **{**TINY, "training": "layerwise", "layerwise": {"passes": 4, "C": 1e4, "proximal": 1.0}},
    )
    data = cifar10.load_data(cfg)
    normalise = Normaliser(data["train"][0])
    torch.manual_seed(0)
    net = PLCNN(tuple(TINY["widths"])).eval()
    layer = net.linear_layers()[-1]
    step_loss, _ = phases._phase_loss("ap_qs")
    x, y = normalise(data["train"][0]), torch.from_numpy(data["train"][1])
    pattern = net.patterns(x)
    order = np.random.default_rng([cfg["seed"], 0]).permutation(len(y))
    blocks = [order[i : i + cfg["batch_size"]] for i in range(0, len(y), cfg["batch_size"])]
    theta0 = parameters_to_vector([layer.weight, layer.bias]).detach().clone()
    lam = cfg["layerwise"]["proximal"] / cfg["layerwise"]["C"]

    def objective():
        with torch.no_grad():
            scores = net.forward_fixed(x, pattern)
            u = parameters_to_vector([layer.weight, layer.bias]) - theta0
            hinge = np.mean([step_loss(scores[b], y[b])[0].item() for b in blocks])
            return lam / 2 * float(u @ u) + hinge

    before = objective()
    with tqdm(disable=True) as bar:
        step_s, *_ = phases._svm_layer(cfg, net, layer, step_loss, data, normalise, 0, bar)
    assert len(step_s) == 4 * len(blocks)
    assert objective() < before - 1e-3
