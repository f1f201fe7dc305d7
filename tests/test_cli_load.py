"""`qsrank load poselet` (cli/load.py): a poselet list to an .npz cache, and bad input in
one line with nothing written."""

import pytest
from click.testing import CliRunner

from qs.data import load_npz_cache
from qsrank.main import main
from tests.test_data_poselet import truncate, write_poselet

# --- qsrank load poselet ------------------------------------------------------------------


def test_cli_load_poselet(tmp_path):
    list_path = write_poselet(tmp_path)
    out = tmp_path / "cache.npz"
    result = CliRunner().invoke(main, ["load", "poselet", str(list_path), "--out", str(out)])
    assert result.exit_code == 0, result.output
    for text in (
        "boxes: 6",
        "images: 3",
        "dimensions: 2405",
        "ignored (label 0): 1",
        "other actions: 1",
        "phoning",
        "sha256",
        "cache: ",
    ):
        assert text in result.output
    assert load_npz_cache(out).X.shape == (6, 2405)


@pytest.mark.parametrize("bad", ["truncated", "dimension", "missing"])
def test_cli_load_poselet_bad_input(tmp_path, bad):
    list_path = write_poselet(tmp_path)
    if bad == "truncated":
        truncate(list_path, 7)
    elif bad == "dimension":
        (tmp_path / "2011_000002_3.feature").write_text("5:1 2406:1")
    else:
        (tmp_path / "2011_000003_4.feature").unlink()
    out = tmp_path / "cache.npz"
    result = CliRunner().invoke(main, ["load", "poselet", str(list_path), "--out", str(out)])
    assert result.exit_code != 0 and "Error:" in result.output
    assert ("trainval.txt" if bad == "truncated" else ".feature") in result.output
    assert "Traceback" not in result.output and not out.exists()
