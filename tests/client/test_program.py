"""Running user programs: missing files, programs that raise or never execute (no Spark)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from flintlock.client.cli import cli
from flintlock.client.context import ClientContext, current_overrides
from flintlock.client.program import (
    ProgramInvocationException,
    ProgramMissingJobException,
    run_program,
)


def test_missing_program_file_is_named(tmp_path: Path) -> None:
    with pytest.raises(ProgramInvocationException, match="nope.py"):
        run_program(str(tmp_path / "nope.py"), [], ClientContext())


def test_program_without_execute_is_an_error(tmp_path: Path) -> None:
    prog = tmp_path / "noop.py"
    prog.write_text("x = 1\n")
    with pytest.raises(ProgramMissingJobException, match="did not call execute"):
        run_program(str(prog), [], ClientContext())


def test_program_sees_its_args_overrides_and_own_modules(tmp_path: Path) -> None:
    (tmp_path / "helper_mod.py").write_text("VALUE = 41\n")
    prog = tmp_path / "prog.py"
    prog.write_text(
        "import sys, helper_mod\n"
        "from flintlock.client.context import current_overrides, current_context\n"
        "ctx = current_context()\n"
        "ctx.submitted.append(f\"{sys.argv[1:]}|{helper_mod.VALUE + 1}|"
        "{current_overrides().get_raw('parallelism.default')}\")\n"
    )
    from flintlock.config import Configuration

    ctx = ClientContext(overrides=Configuration({"parallelism.default": 3}))
    run_program(str(prog), ["--in", "x"], ctx)
    assert ctx.submitted == ["['--in', 'x']|42|3"]
    assert current_overrides().to_dict() == {}  # the context ends with the program
    assert str(tmp_path) not in sys.path


def test_cli_run_reports_a_raising_main_with_exit_code_1(tmp_path: Path) -> None:
    prog = tmp_path / "boom.py"
    prog.write_text("def main():\n    raise ValueError('bad input file')\nmain()\n")
    result = CliRunner().invoke(cli, ["run", str(prog)])
    assert result.exit_code == 1
    assert "ValueError: bad input file" in result.output
    assert "main method raised" in result.output


def test_cli_run_without_execute_and_bad_config_exit_nonzero(tmp_path: Path) -> None:
    prog = tmp_path / "noop.py"
    prog.write_text("print('hello')\n")
    result = CliRunner().invoke(cli, ["run", str(prog)])
    assert result.exit_code == 1 and "did not call execute()" in result.output
    result = CliRunner().invoke(cli, ["run", "-D", "heartbeat.timeout=soon", str(prog)])
    assert result.exit_code == 1 and "heartbeat.timeout" in result.output
    result = CliRunner().invoke(cli, ["run", "-D", "no.such.key=1", str(prog)])
    assert result.exit_code == 1 and "Unknown configuration key 'no.such.key'" in result.output


def test_python_dash_m_flintlock_prints_help() -> None:
    out = subprocess.run([sys.executable, "-m", "flintlock", "--help"], capture_output=True,
                         text=True, check=True)
    assert "run" in out.stdout and "info" in out.stdout
