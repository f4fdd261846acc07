"""`python -m citewise`: the console script found through its entry point (the library never imports the
local package), and a hint where it is not installed (the Lambda layer has no distribution metadata).
The installed-package test runs it for real from a wheel."""

from __future__ import annotations

from importlib.metadata import EntryPoint, EntryPoints
from typing import Any

import pytest

from citewise import __main__ as module


def test_it_runs_the_installed_citewise_command(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # Given the console script the distribution registers
    asked: list[dict[str, Any]] = []

    def entry_points(**selection: Any) -> EntryPoints:
        asked.append(selection)
        return EntryPoints([EntryPoint("citewise", "citewise_local.cli:main", "console_scripts")])

    monkeypatch.setattr(module, "entry_points", entry_points)
    monkeypatch.setattr("sys.argv", ["citewise", "token", "--tenant", "acme", "--ttl", "soon"])
    # When python -m citewise runs with arguments the command refuses (a --ttl that is not a number)
    # Then it is the command that parsed them (argparse's usage error), found by name in its group
    with pytest.raises(SystemExit) as exited:
        module.main()
    assert exited.value.code == 2
    assert "citewise token: error: argument --ttl: invalid int value: 'soon'" in capsys.readouterr().err
    assert asked == [{"group": "console_scripts", "name": "citewise"}]


def test_without_the_command_it_says_how_to_install_it(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(module, "entry_points", lambda **_: EntryPoints(()))
    assert module.main() == 2
    assert "pip install 'citewise[local]'" in capsys.readouterr().err
