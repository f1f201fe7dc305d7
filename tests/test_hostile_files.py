"""Readers and configs facing hostile or damaged files: a crash, a hang, an unbounded read, a
path out of the data directory or a huge value each become a one-line ValueError."""

import json
import os
import re
import signal
import threading

import numpy as np
import pytest
import scipy.io
from click.testing import CliRunner

import qs.data.files as files_module
import qs.data.poselet as poselet_module
from qs.data import (
    load_features,
    load_image_set,
    load_latent_list,
    load_npz_cache,
    load_poselet,
    load_rcnn_cache,
)
from qs.data.cifar10 import read_binary_batch
from qs.data.files import read_json
from qs.data.formats import read_isolated
from qsrank.main import main
from qsrank.pipelines import scaling
from qsrank.pipelines._yaml import CONFIG_BYTES, parse_yaml, read_config
from tests.test_data_poselet import write_poselet


def _segfaulting_mat(path, byte=177, value=0x0F):
    """An uncompressed v5 .mat whose data type tag (bytes 176-177) scipy's reader looks up
    out of its table: 0x0f07 (the issue's) crashes it or reads a zero item size, depending on
    the memory it lands on; 0x00ff crashes it."""
    scipy.io.savemat(
        path, {"X": np.ones((10, 16), np.float32), "y": np.zeros(10)}, do_compression=False
    )
    raw = bytearray(path.read_bytes())
    raw[byte] = value
    path.write_bytes(bytes(raw))
    return path


def _crash(path):
    os.kill(os.getpid(), signal.SIGSEGV)


def test_a_reader_that_crashes_becomes_a_one_line_error_naming_the_file(tmp_path):
    path = tmp_path / "a.mat"
    path.write_bytes(b"")
    with pytest.raises(
        ValueError,
        match=r"a\.mat: the reader process died \(killed by "
        r"SIGSEGV\) reading this file, which is likely corrupt",
    ):
        list(read_isolated([path], _crash))


def test_a_mat_file_that_crashes_scipy_is_a_one_line_error(tmp_path):
    path = _segfaulting_mat(tmp_path / "seg.mat")  # the issue's file
    with pytest.raises(ValueError, match=r"seg\.mat"):
        load_features(path)
    good = tmp_path / "good.mat"
    scipy.io.savemat(good, {"X": np.eye(3), "y": np.arange(3.0)}, do_compression=False)
    X, y = load_features(good)  # the next read works as before
    np.testing.assert_array_equal(X, np.eye(3))
    np.testing.assert_array_equal(y, np.arange(3.0))


# What scipy does with an out-of-table type tag depends on the memory the lookup lands on: it
# crashes the reader process, or reads a zero item size and raises. Either way one line names
# the file (the crash itself is made certain in the test above).
# the damaged file's reader dies of SIGSEGV or SIGBUS, as the bytes it meets decide
BAD_MAT = (
    r"(: the reader process died \(killed by SIG(SEGV|BUS)\) reading this file, which is "
    r"likely corrupt; remove or replace it\.|Cannot read .* as MATLAB \.mat \(corrupt, "
    r"truncated or another format\?\): .*)"
)


def test_an_rcnn_cache_that_crashes_the_reader_is_named(tmp_path):
    rng = np.random.default_rng(0)
    scipy.io.savemat(
        tmp_path / "000001.mat",
        {"boxes": np.array([[1.0, 1, 5, 5]]), "feat": rng.normal(size=(1, 3))},
    )
    _segfaulting_mat(tmp_path / "000002.mat", 176, 0xFF)
    with pytest.raises(ValueError, match=BAD_MAT) as err:
        load_rcnn_cache(tmp_path)
    assert "000002.mat" in str(err.value) and "\n" not in str(err.value)


def test_train_on_a_mat_file_that_crashes_the_reader_is_a_one_line_error(tmp_path):
    rng = np.random.default_rng(0)
    for split in ("trainval", "test"):
        (tmp_path / split).mkdir()
        scipy.io.savemat(
            tmp_path / split / "000001.mat",
            {"boxes": np.array([[1.0, 1, 5, 5]]), "feat": rng.normal(size=(1, 3))},
        )
    _segfaulting_mat(tmp_path / "test" / "000002.mat", 176, 0xFF)
    config = _config(
        tmp_path,
        f"experiment: voc2007_detection\ndata: {{trainval: "
        f"{tmp_path / 'trainval'}, test: {tmp_path / 'test'}}}\n",
    )
    result = CliRunner().invoke(
        main, ["train", "--config", str(config), "--out", str(tmp_path / "run")]
    )
    assert result.exit_code == 1, result.output
    assert result.output.count("\n") == 1 and str(tmp_path / "test" / "000002.mat") in result.output
    assert re.fullmatch(r"Error: .*" + BAD_MAT + "\n", result.output), result.output


# --- bounded reads: only regular files, of a bounded size -----------------------------------


def _in_thread(fn):
    """What ``fn()`` returns or raises, run in a daemon thread; "still running" if it blocks
    (a reader waiting on a FIFO must not take the test run with it)."""
    outcome = ["still running"]

    def target():
        try:
            outcome[0] = fn()
        except Exception as err:
            outcome[0] = err

    thread = threading.Thread(target=target, daemon=True)
    thread.start()
    thread.join(30)
    return outcome[0]


def test_a_feature_file_that_is_a_fifo_is_refused_not_waited_on(tmp_path):
    path = write_poselet(tmp_path)
    fifo = tmp_path / "2011_000001_1.feature"
    fifo.unlink()
    os.mkfifo(fifo)
    err = _in_thread(lambda: load_poselet(path))
    assert isinstance(err, ValueError), err
    assert re.search(
        r"2011_000001_1\.feature .*line 3: it is a FIFO, not a regular file", str(err)
    ), err


@pytest.mark.parametrize("target", ["/dev/zero", "fifo"])
def test_lists_and_data_files_on_devices_or_fifos_are_refused(tmp_path, target):
    if target == "fifo":
        target = tmp_path / "fifo"
        os.mkfifo(target)
    kind = "a FIFO" if target != "/dev/zero" else "a device"
    for name, read in [
        ("list.txt", load_poselet),
        ("set.txt", load_image_set),
        ("latent.txt", lambda p: load_latent_list(p, n_features=4)),
        ("f.svm", load_features),
        ("f.mat", load_features),
        ("000001.mat", load_rcnn_cache),
        ("cache.npz", load_npz_cache),
        ("data_batch_1.bin", read_binary_batch),
    ]:
        link = tmp_path / name
        link.symlink_to(target)
        err = _in_thread(lambda: read(link))  # noqa: B023 - called before the next iteration
        assert isinstance(err, ValueError), (name, err)
        assert f"{name}: it is {kind}, not a regular file" in str(err), (name, err)
        link.unlink()


@pytest.mark.parametrize("target", ["/dev/zero", "fifo", "large", "torn", "missing"])
def test_a_json_record_that_cannot_be_read_counts_as_absent(tmp_path, monkeypatch, target):
    """Run records and store progress are read by read_json: a device, a FIFO, a file above
    the bound, a half-written record or a missing one is None, never a hang or a full read."""
    monkeypatch.setattr(files_module, "SAMPLE_BYTES", 100)
    path = tmp_path / "record.json"
    if target == "fifo":
        os.mkfifo(path)
    elif target == "/dev/zero":
        path.symlink_to(target)
    elif target == "large":
        path.write_text(json.dumps({"k": "v" * 200}))
    elif target == "torn":
        path.write_text('{"k": ')
    assert _in_thread(lambda: read_json(path)) is None
    path.unlink(missing_ok=True)
    path.write_text('{"k": 1}')
    assert read_json(path) == {"k": 1}


def test_a_list_file_above_the_size_bound_is_refused(tmp_path, monkeypatch):
    monkeypatch.setattr(poselet_module, "LIST_BYTES", 100)
    path = tmp_path / "list.txt"
    path.write_text("0\n" + " " * 200)
    with pytest.raises(ValueError, match=r"list\.txt: it is larger than 100 bytes"):
        load_poselet(path)


# --- paths inside the data directory, file contents kept out of messages -------------------


@pytest.mark.parametrize("name", ["../elsewhere/secret", "/abs/elsewhere/secret"])
def test_a_poselet_list_cannot_name_files_outside_the_data_directory(tmp_path, name):
    data, elsewhere = tmp_path / "data", tmp_path / "elsewhere"
    data.mkdir()
    elsewhere.mkdir()
    images = [(name.replace("/abs", str(tmp_path)), [(1, 2, {1: 0.5})])]
    list_path = write_poselet(data, images=[("x", [(1, 2, {1: 0.5})])])
    (elsewhere / "secret_1.feature").write_text("1:0.5\n")
    lines = list_path.read_text().replace(" x ", f" {images[0][0]} ")
    list_path.write_text(lines)
    with pytest.raises(
        ValueError,
        match=r"list\.txt, line 3|trainval\.txt, line 3: .* is not "
        r"a path inside the data directory",
    ):
        load_poselet(list_path)


def test_an_image_set_id_cannot_climb_out_of_the_data_directory(tmp_path):
    path = tmp_path / "trainval.txt"
    path.write_text("000005\n../outside/foreign\n")
    with pytest.raises(
        ValueError,
        match=r"trainval\.txt, line 2: the image id .* is not a "
        r"file name",
    ):
        load_image_set(path)


def test_a_foreign_file_read_as_features_is_not_quoted(tmp_path):
    path = write_poselet(tmp_path)
    secret = tmp_path / "passwd"
    secret.write_text("secretuser:x:1000:1000:Secret User:/home/secretuser:/bin/bash\n")
    feature = tmp_path / "2011_000001_1.feature"
    feature.unlink()
    feature.symlink_to(secret)
    with pytest.raises(ValueError, match=r"2011_000001_1\.feature, line 1: pair 1") as err:
        load_poselet(path)
    assert "secretuser" not in str(err.value) and "bash" not in str(err.value)
    path.write_text("secretuser:x:1000:1000:Secret User:/home/secretuser:/bin/bash\n")
    with pytest.raises(ValueError, match="expected the number of images") as err:
        load_poselet(path)
    assert "secretuser" not in str(err.value) and "bash" not in str(err.value)


# --- configs: read bounded, plain and strict --------------------------------------------------


def _config(tmp_path, text):
    path = tmp_path / "config.yaml"
    path.write_bytes(text if isinstance(text, bytes) else text.encode())
    return path


def test_a_yaml_alias_bomb_is_refused_before_it_expands(tmp_path):
    lines = ["a0: &a0 [x, x, x, x, x, x, x, x, x]"]
    lines += [f"a{k}: &a{k} [{', '.join([f'*a{k - 1}'] * 9)}]" for k in range(1, 7)]
    path = _config(tmp_path, "\n".join(lines) + "\nseed: *a6\n")
    with pytest.raises(ValueError, match=r"config .*config\.yaml: line 1: anchors and aliases"):
        scaling.load_config(path)


@pytest.mark.parametrize(
    "text, message",
    [
        ("C: 1.0e-320\n", r"line 1: C is 1\.0e-320, below the smallest normal float"),
        ("grid: [1.0, 1e-320]\n", r"line 1: an entry of grid is 1e-320, below the smallest"),
        ("seed: 1\nvary: total\nseed: 2\n", r"line 3: key 'seed' is repeated \(first on line 1\)"),
        ("a: " + "[" * 2000 + "]" * 2000 + "\n", r"line 1: nested deeper than 32 levels"),
        (b"seed: 1\nvary: \xe9\n", r"line 2: byte 0xe9 is not UTF-8 text"),
    ],
)
def test_config_defects_are_one_line_errors_naming_what(tmp_path, text, message):
    with pytest.raises(ValueError, match=message) as err:
        read_config(_config(tmp_path, text))
    assert "\n" not in str(err.value)


def test_decimal_exponents_read_as_floats(tmp_path):
    path = _config(tmp_path, "a: 1.0e308\nb: 1e-5\nc: -2E3\nd: 1.0e+3\ne: 7\nf: '1e5'\n")
    assert read_config(path) == {
        "a": 1e308,
        "b": 1e-5,
        "c": -2000.0,
        "d": 1000.0,
        "e": 7,
        "f": "1e5",
    }
    assert isinstance(read_config(path)["a"], float)


@pytest.mark.parametrize("target", ["/dev/zero", "fifo", "big"])
def test_a_config_that_is_no_regular_file_or_too_large_is_refused(tmp_path, target):
    path = tmp_path / "config.yaml"
    if target == "fifo":
        os.mkfifo(path)
    elif target == "big":
        path.write_text("seed: 0\n" + "#" * CONFIG_BYTES + "\n")
    else:
        path.symlink_to(target)
    result = _in_thread(lambda: CliRunner().invoke(main, ["train", "--config", str(path)]))
    assert not isinstance(result, str), result  # it did not block on the FIFO
    assert result.exit_code == 1, result.output
    reason = {
        "fifo": "it is a FIFO",
        "big": "it is larger than 1,048,576 bytes",
        "/dev/zero": "it is a device",
    }[target]
    assert f"cannot read config {path}: {reason}" in result.output
    assert result.output.count("\n") == 1, result.output


def test_cli_names_a_non_utf8_config(tmp_path):
    path = _config(tmp_path, b"experiment: digits\nseed: \xff\n")
    result = CliRunner().invoke(main, ["train", "--config", str(path)])
    assert result.exit_code == 1
    assert result.output == (
        f"Error: config {path}: line 2: byte 0xff is not UTF-8 text; save the config as UTF-8\n"
    )


# --- qsrank bench: sizes beyond memory ---------------------------------------------------------


def test_bench_sizes_beyond_memory_are_refused_naming_the_setting(tmp_path):
    path = _config(tmp_path, "presets:\n  paper:\n    negatives: {stop: 1000000000000}\n")
    with pytest.raises(
        ValueError,
        match=r"presets\.paper\.negatives: the largest size \(227 "
        r"positives, 1000000000000 negatives\) needs about "
        r"[\d,]+ GB .*lower its stop",
    ):
        scaling.load_config(path)
    result = CliRunner().invoke(
        main, ["bench", "--config", str(path), "--out", str(tmp_path / "run")]
    )
    assert result.exit_code == 1 and result.output.count("\n") == 1, result.output
    assert "presets.paper.negatives" in result.output


def test_bench_out_of_memory_is_one_line_naming_the_setting(tmp_path, monkeypatch):
    def run(config, out):
        raise MemoryError

    monkeypatch.setattr(scaling, "run", run)
    result = CliRunner().invoke(
        main, ["bench", "--preset", "quick", "--out", str(tmp_path / "run")]
    )
    assert result.exit_code == 1, result.output
    assert result.output == (
        "Error: out of memory timing the sizes of presets.quick.negatives "
        "(stop 200); lower its stop\n"
    )


# --- formats without a length: every check they allow -----------------------------------------


def test_text_files_cut_short_mid_line_are_refused(tmp_path):
    list_path = write_poselet(tmp_path)
    feature = tmp_path / "2011_000001_1.feature"
    feature.write_bytes(feature.read_bytes()[:-2])  # "... 2401:0.3\n" -> "... 2401:0."
    with pytest.raises(
        ValueError,
        match=r"2011_000001_1\.feature: the last line ends without a "
        r"newline; the file looks cut short",
    ):
        load_poselet(list_path)
    feature.write_bytes(feature.read_bytes() + b"3\n")
    load_poselet(list_path)  # whole again
    list_path.write_bytes(list_path.read_bytes()[:-1])
    with pytest.raises(ValueError, match=r"trainval\.txt: the last line ends without a newline"):
        load_poselet(list_path)
    image_set = _config(tmp_path, "000005 1\n000007 -1\n000009 -")
    with pytest.raises(ValueError, match=r"config\.yaml: the last line ends without a newline"):
        load_image_set(image_set)
    svm = tmp_path / "f.svm"
    svm.write_text("1 1:0.5 2:1.25\n-1 3:2.0")
    with pytest.raises(ValueError, match=r"f\.svm: the last line ends without a newline"):
        load_features(svm)
    latent = tmp_path / "latent.txt"
    latent.write_text("0")
    with pytest.raises(ValueError, match=r"latent\.txt: the last line ends without a newline"):
        load_latent_list(latent, n_features=4)


@pytest.mark.parametrize("image_id", ["0000\x075", "00000\xe9", "a/b", "..", "x:y"])
def test_image_ids_are_portable_file_names(tmp_path, image_id):
    path = tmp_path / "trainval.txt"
    path.write_bytes(b"000005\n" + image_id.encode() + b"\n")
    with pytest.raises(
        ValueError,
        match=r"trainval\.txt, line 2: the image id .* is not a file "
        r"name of letters, digits and \._-",
    ):
        load_image_set(path)


def test_parse_yaml_reads_a_command_line_value_by_the_config_rules():
    assert parse_yaml("1e-5") == 1e-5 and parse_yaml("[ap, 0-1]") == ["ap", "0-1"]
    with pytest.raises(ValueError, match="anchors and aliases"):
        parse_yaml("[&a 1, *a]")


@pytest.mark.parametrize("text", ["\x00\x01\x02", "seed: 1\x07\n"])
def test_a_control_character_is_a_one_line_error(tmp_path, text):
    """yaml's reader refuses a control character as the loader is made, before parsing:
    that error was a traceback."""
    words = r"unacceptable character #x00\w\w: special characters are not allowed in "
    with pytest.raises(ValueError, match=words + r"the config, position \d"):
        read_config(_config(tmp_path, text))
    with pytest.raises(ValueError, match=words + r"--set seed, position \d"):
        parse_yaml(text, "--set seed")
