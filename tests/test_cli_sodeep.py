"""`qsrank sodeep` (cli/sodeep.py, pipelines/sodeep.py): its choices match the library's,
train then eval a sorter, and bad input is one line."""

import pytest

pytest.importorskip("torch")
from qs.surrogates import sodeep
from qs.surrogates.sodeep import DEFAULT_LENGTH, load_sorter


def test_cli_choices_match_their_sources():
    import qsrank.sodeep as cli_sodeep

    assert cli_sodeep.SORTER_KINDS == sodeep.KINDS
    assert cli_sodeep.SORTER_LENGTH == DEFAULT_LENGTH


def test_cli_train_then_eval(tmp_path):
    from click.testing import CliRunner

    from qsrank.main import main

    out = tmp_path / "cnn8.pt"
    result = CliRunner().invoke(
        main,
        [
            "sodeep",
            "train",
            "--kind",
            "cnn",
            "--length",
            "8",
            "--steps",
            "3",
            "--test-vectors",
            "50",
            "--out",
            str(out),
        ],
    )
    assert result.exit_code == 0, result.output
    assert "cnn sorter, length 8" in result.output and out.is_file()
    meta = load_sorter(out).meta
    assert meta["steps"] == 3 and meta["test_vectors"] == 50 and meta["train_seconds"] >= 0
    assert meta["provenance"]["seed"] == 0
    assert not list(tmp_path.glob(".*.tmp"))  # the atomic write left no temporary file

    result = CliRunner().invoke(
        main, ["sodeep", "eval", "--checkpoint", str(out), "--vectors", "50"]
    )
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert lines[0].startswith("| sorter") and len(lines) == 4
    handcrafted, cnn = ([c.strip() for c in line.split("|")[1:-1]] for line in lines[2:])
    assert handcrafted[0] == "handcrafted" and handcrafted[-1] == "0.0350"
    # the same seeded test vectors as the error recorded at training
    assert cnn[0] == "cnn" and cnn[-2] == f"{meta['test_l1']:.4f}" and cnn[-1] == "0.0120"


def test_cli_bad_input_is_one_line(tmp_path):
    from click.testing import CliRunner

    from qsrank.main import main

    runner = CliRunner()
    result = runner.invoke(
        main,
        [
            "sodeep",
            "train",
            "--kind",
            "cnn",
            "--hidden",
            "4",
            "--length",
            "8",
            "--steps",
            "1",
            "--out",
            str(tmp_path / "x.pt"),
        ],
    )
    assert result.exit_code == 1 and "no hyper-parameter hidden" in result.output
    assert not (tmp_path / "x.pt").exists()
    result = runner.invoke(
        main, ["sodeep", "train", "--length", "8", "--steps", "1", "--out", str(tmp_path)]
    )
    assert result.exit_code == 2 and "is a directory" in result.output
    junk = tmp_path / "junk.pt"
    junk.write_bytes(b"garbage")
    result = runner.invoke(main, ["sodeep", "eval", "--checkpoint", str(junk)])
    assert result.exit_code == 1 and "not a readable sorter checkpoint" in result.output
    assert "Traceback" not in result.output
