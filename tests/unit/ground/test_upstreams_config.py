"""config.toml's [upstreams.NAME] tables: parsed, refused with the file and upstream named, and
written by text so that the rest of the file stays as the user left it."""

from __future__ import annotations

from pathlib import Path

import pytest

from localserve.ground import settings, upstreams
from localserve.ground.upstreams import UpstreamConfig, UpstreamConfigError


def test_a_table_per_upstream_with_models_or_all(tmp_path: Path) -> None:
    path = tmp_path / "config.toml"
    path.write_text(
        'port = 9999\n[upstreams.gpubox]\nurl = "http://gpubox:8000/v1/"\nkey_env = "K"\n'
        '[upstreams.sg]\nurl = "http://h:30000"\nmodels = ["a", "b/c"]\n'
    )
    got = upstreams.read(path)
    assert got == (
        UpstreamConfig("gpubox", "http://gpubox:8000/v1", "K", None),
        UpstreamConfig("sg", "http://h:30000/v1", None, ("a", "b/c")),
    )
    # The settings read the same file and leave the upstreams' tables to ground/upstreams.py.
    assert settings.load(env={}, path=path).port == 9999


def test_the_key_comes_from_the_named_variable_only() -> None:
    config = UpstreamConfig("x", "http://h/v1", "UPSTREAM_KEY")
    assert config.key({"UPSTREAM_KEY": "sekrit-123"}) == "sekrit-123"
    assert config.key({}) is None
    assert UpstreamConfig("x", "http://h/v1").key({"UPSTREAM_KEY": "s"}) is None


@pytest.mark.parametrize(
    ("table", "says"),
    [
        ('url = "ftp://h"', "http"),
        ('url = "http://user:pw@h/v1"', "key_env"),
        ('url = "http://h/v1?key=1"', "key_env"),
        ("models = []", "url"),
        ('url = "http://h/v1"\nmodels = "a"', "list of model names"),
        ('url = "http://h/v1"\nkey_env = "not a var"', "environment variable"),
        ('url = "http://h/v1"\nkey = "sekrit"', "unknown key key"),
    ],
)
def test_a_bad_table_is_refused_naming_the_upstream(tmp_path: Path, table: str, says: str) -> None:
    path = tmp_path / "config.toml"
    path.write_text(f"[upstreams.box]\n{table}\n")
    with pytest.raises(UpstreamConfigError, match=f"upstream 'box'.*{says}"):
        upstreams.read(path)


def test_add_replace_and_remove_keep_the_rest_of_the_file(tmp_path: Path) -> None:
    path = tmp_path / "config.toml"
    path.write_text('# mine\nkeep_alive = "5m"\n\n[upstreams.old]\nurl = "http://o/v1"\n')
    assert not upstreams.add(path, UpstreamConfig("box", "http://h:8000/v1", "K", ("a",)))
    assert upstreams.add(path, UpstreamConfig("box", "http://h:9000/v1"))
    assert [u.url for u in upstreams.read(path)] == ["http://o/v1", "http://h:9000/v1"]
    assert upstreams.remove(path, "old")
    assert not upstreams.remove(path, "old")
    text = path.read_text()
    assert text.startswith('# mine\nkeep_alive = "5m"\n')
    assert upstreams.read(path) == (UpstreamConfig("box", "http://h:9000/v1"),)


def test_a_url_without_a_path_gets_v1() -> None:
    assert upstreams.normalize_url("http://h:8000") == "http://h:8000/v1"
    assert upstreams.normalize_url("https://h/openai/v1/") == "https://h/openai/v1"


def test_the_cli_adds_lists_and_removes_without_a_daemon(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from localserve.cli import main

    path = tmp_path / "config.toml"
    monkeypatch.setenv("LOCALSERVE_CONFIG", str(path))
    monkeypatch.setenv("LOCALSERVE_PORT", "9")  # no daemon there: `list` says so
    assert main(["upstream", "add", "gpu", "http://gpu:8000/v1", "--models", "a, b"]) == 0
    assert main(["upstream", "add", "bad name", "http://h"]) == 2
    assert main(["upstream", "add", "x", "http://u:p@h/v1"]) == 2
    assert upstreams.read(path) == (UpstreamConfig("gpu", "http://gpu:8000/v1", None, ("a", "b")),)
    capsys.readouterr()
    assert main(["upstream", "list"]) == 0
    assert capsys.readouterr().out.split("\n")[1].split() == [
        "gpu",
        "http://gpu:8000/v1",
        "a,",
        "b",
        "-",
        "no",
        "daemon",
    ]
    assert main(["upstream", "remove", "gpu"]) == 0
    assert main(["upstream", "remove", "gpu"]) == 2
    assert upstreams.read(path) == ()
