"""Settings: flags win over the environment, which wins over the config file, then defaults."""

from __future__ import annotations

from pathlib import Path

import pytest

from localserve.config import Config, ConfigError, config_path, load

NO_FILE = Path("/nonexistent/localserve.toml")


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "config.toml"
    path.write_text(text)
    return path


def test_defaults_when_nothing_is_set():
    settings = load({}, env={}, path=NO_FILE)
    assert settings == Config()
    assert settings.url == "http://127.0.0.1:11434"


def test_the_config_file_overrides_defaults(tmp_path):
    path = write(tmp_path, 'port = 9000\nkeep_alive = "10m"\n')
    settings = load({}, env={}, path=path)
    assert (settings.port, settings.keep_alive) == (9000, "10m")


def test_the_environment_overrides_the_config_file(tmp_path):
    path = write(tmp_path, "port = 9000\n")
    assert load({}, env={"LOCALSERVE_PORT": "9100"}, path=path).port == 9100


def test_flags_override_the_environment(tmp_path):
    path = write(tmp_path, "port = 9000\n")
    settings = load({"port": 9200}, env={"LOCALSERVE_PORT": "9100"}, path=path)
    assert settings.port == 9200


def test_a_flag_left_unset_does_not_hide_the_environment():
    assert load({"port": None}, env={"LOCALSERVE_PORT": "9100"}, path=NO_FILE).port == 9100


def test_models_dir_comes_from_localserve_models_like_ollama_models():
    settings = load({}, env={"LOCALSERVE_MODELS": "~/m"}, path=NO_FILE)
    assert settings.models_dir == str(Path("~/m").expanduser())


def test_a_host_may_carry_its_port_as_ollama_host_does():
    settings = load({}, env={"LOCALSERVE_HOST": "http://0.0.0.0:8080"}, path=NO_FILE)
    assert (settings.host, settings.port) == ("0.0.0.0", 8080)
    assert settings.url == "http://127.0.0.1:8080", "a client connects to loopback"


def test_a_port_set_at_a_higher_level_wins_over_the_port_inside_a_host(tmp_path):
    path = write(tmp_path, 'host = "127.0.0.1:9000"\n')
    assert load({"port": 9300}, env={}, path=path).port == 9300


def test_the_config_file_is_found_through_localserve_config(tmp_path):
    assert config_path({"LOCALSERVE_CONFIG": str(tmp_path / "x.toml")}) == tmp_path / "x.toml"


def test_an_unknown_setting_in_the_file_is_an_error_naming_it(tmp_path):
    path = write(tmp_path, "prot = 1\n")
    with pytest.raises(ConfigError, match="prot"):
        load({}, env={}, path=path)


def test_a_bad_value_names_where_it_came_from():
    with pytest.raises(ConfigError, match=r"\$LOCALSERVE_PORT"):
        load({}, env={"LOCALSERVE_PORT": "eleven"}, path=NO_FILE)
