"""Layer 1: the ``flintlock`` command freezes the garbage collector's objects before its
process exits (``cli.main``), whichever way the command ends."""

from __future__ import annotations

import pytest

from flintlock.client import cli


@pytest.mark.parametrize("ending", [SystemExit(0), SystemExit(2), KeyboardInterrupt()])
def test_the_command_freezes_the_heap_however_it_ends(monkeypatch, ending):
    calls: list[str] = []

    def command(**_: object) -> None:
        calls.append("command")
        raise ending

    monkeypatch.setattr(cli, "cli", command)
    monkeypatch.setattr(cli.gc, "freeze", lambda: calls.append("freeze"))
    with pytest.raises(type(ending)):
        cli.main()
    assert calls == ["command", "freeze"]
