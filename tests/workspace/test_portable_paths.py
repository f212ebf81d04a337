"""Placeholders for this machine's folders in exported records (pure text: no tool involved)."""

from __future__ import annotations

from pathlib import Path

from np_optimizer.workspace.portable import MachinePaths


def test_the_longest_folder_wins_and_only_whole_components_match(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    paths = MachinePaths([(tmp_path, "<tmp>"), (ws, "<workspace>"), (ws / "p" / "exp", "<experiment>")])
    assert paths.text(f"{ws}/p/exp/01_gq/model.pt2") == "<experiment>/01_gq/model.pt2"
    assert paths.text(f"{ws}/other") == "<workspace>/other"
    assert paths.text(f'File "{tmp_path}/x.py", line 3') == 'File "<tmp>/x.py", line 3'
    assert paths.text(f"{ws}2/kept") == "<tmp>/ws2/kept"  # ws2 is not ws
    assert paths.text(f"{ws}:105: warning") == "<workspace>:105: warning"


def test_json_values_and_keys_are_made_portable_and_other_values_kept(tmp_path: Path) -> None:
    paths = MachinePaths([(tmp_path, "<tmp>")])
    value = {"entry": f"{tmp_path}/c/k", f"{tmp_path}/key": [1, None, f"see {tmp_path}"], "n": 2.5}
    assert paths.json(value) == {"entry": "<tmp>/c/k", "<tmp>/key": [1, None, "see <tmp>"], "n": 2.5}


def test_root_alone_is_never_a_placeholder() -> None:
    assert MachinePaths([("/", "<root>")]).text("/usr/lib") == "/usr/lib"
