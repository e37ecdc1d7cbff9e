"""The cluster secret file is kept private: no symlinks, no group/world access (issue 16, defect 4)."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from flintlock.client import remote
from flintlock.client.secret_file import (
    InsecureSecretFileError,
    read_secret_file,
    write_secret_file,
)
from flintlock.client.standalone_cluster import _ensure_secret
from flintlock.config import Configuration


def _mode(path: Path) -> int:
    return stat.S_IMODE(os.stat(path).st_mode)


def test_cluster_start_fixes_an_existing_world_readable_secret_file(tmp_path):
    path = tmp_path / "secret"
    path.write_text("old")
    path.chmod(0o644)
    value = _ensure_secret(tmp_path, Configuration())
    assert _mode(path) == 0o600
    assert path.read_text() == value and len(value) == 64


def test_cluster_start_refuses_to_write_through_a_symlink(tmp_path):
    target = tmp_path / "elsewhere"
    target.write_text("precious")
    (tmp_path / "secret").symlink_to(target)
    with pytest.raises(InsecureSecretFileError, match="symbolic link"):
        _ensure_secret(tmp_path, Configuration())
    assert target.read_text() == "precious"


def test_a_new_secret_file_is_private(tmp_path):
    write_secret_file(tmp_path / "secret", "s")
    assert _mode(tmp_path / "secret") == 0o600


@pytest.mark.parametrize("mode", [0o644, 0o640, 0o604, 0o620])
def test_reading_a_secret_others_can_access_is_refused_with_the_fix(tmp_path, mode):
    path = tmp_path / "secret"
    path.write_text("abc")
    path.chmod(mode)
    with pytest.raises(InsecureSecretFileError) as err:
        read_secret_file(path)
    assert f"chmod 600 {path}" in str(err.value) and f"{mode:04o}" in str(err.value)


def test_reading_through_a_symlink_is_refused(tmp_path):
    target = tmp_path / "target"
    write_secret_file(target, "abc")
    (tmp_path / "secret").symlink_to(target)
    with pytest.raises(InsecureSecretFileError, match="symbolic link"):
        read_secret_file(tmp_path / "secret")


def test_reading_a_private_or_missing_file(tmp_path):
    assert read_secret_file(tmp_path / "secret") is None
    write_secret_file(tmp_path / "secret", "abc\n")
    assert read_secret_file(tmp_path / "secret") == "abc"


def test_the_client_refuses_a_world_readable_state_secret(tmp_path, monkeypatch):
    monkeypatch.delenv("FLINTLOCK_CLUSTER_SECRET", raising=False)
    (tmp_path / "secret").write_text("abc")
    (tmp_path / "secret").chmod(0o644)
    with pytest.raises(InsecureSecretFileError, match="too open"):
        remote._secret(Configuration({"cluster.state-dir": str(tmp_path)}))
