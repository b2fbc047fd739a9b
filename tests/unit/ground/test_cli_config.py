"""Settings: flags win over the environment, which wins over the config file, then defaults."""

from __future__ import annotations

from pathlib import Path

import pytest

from localserve.ground.settings import (
    ENV,
    NAMES,
    SWITCHES,
    ConfigError,
    Settings,
    config_path,
    describe,
    load,
)
from tests.support.helpers import REPO

NO_FILE = Path("/nonexistent/localserve.toml")


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "config.toml"
    path.write_text(text)
    return path


def test_defaults_when_nothing_is_set():
    settings = load({}, env={}, path=NO_FILE)
    assert settings == Settings()
    assert settings.url == "http://127.0.0.1:11434"


def test_the_config_file_overrides_defaults(tmp_path):
    path = write(tmp_path, 'port = 9000\nkeep_alive = "10m"\n')
    settings = load({}, env={}, path=path)
    assert (settings.port, settings.keep_alive) == (9000, 600.0)


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


def readme_row(flag: str, env: str, default: str, text: str) -> str:
    key = flag.removeprefix("--").replace("-", "_")
    return f"| `{flag}` | `{env}` | `{key}` | {default} | {text} |"


def test_every_setting_is_read_from_flags_environment_and_file_in_that_order(tmp_path):
    # One value per level, each a different valid value of the setting's kind.
    samples = {
        "host": ("10.0.0.1", "10.0.0.2", "10.0.0.3"),
        "port": (9001, 9002, 9003),
        "models_dir": ("/a", "/b", "/c"),
        "keep_alive": ("1m", "2m", "3m"),
        "memory_budget": ("1GiB", "2GiB", "3GiB"),
        "prompt_cache": ("1MiB", "2MiB", "3MiB"),
        "max_body": ("1MiB", "2MiB", "3MiB"),
        "allowed_hosts": ("a", "b", "c"),
        "origins": ("a", "b", "c"),
        "import_roots": ("/a", "/b", "/c"),
        "background_share": (0.1, 0.2, 0.3),
        "draft_model": ("a=b", "a=c", "a=d"),
        "alias": ("a=b", "a=c", "a=d"),
        "kv_cache_type": ("f16", "q8_0", "q4_0"),
        "flash_attention": ("auto", "on", "off"),
    }
    two_valued = {"log_format": ("json", "text")}
    for name in NAMES:
        if name in two_valued:  # each level flips it
            a, b = two_valued[name]
            path = write(tmp_path, f'{name} = "{a}"\n')
            assert getattr(load({}, env={}, path=path), name) == a
            assert getattr(load({}, env={ENV[name]: b}, path=path), name) == b
            assert getattr(load({name: a}, env={ENV[name]: b}, path=path), name) == a
            continue
        if name in SWITCHES:  # two values only: each level flips it
            path = write(tmp_path, f"{name} = true\n")
            assert getattr(load({}, env={}, path=path), name) is True
            assert getattr(load({}, env={ENV[name]: "false"}, path=path), name) is False
            assert getattr(load({name: True}, env={ENV[name]: "false"}, path=path), name) is True
            continue
        file_value, env_value, flag_value = samples.get(name, (1, 2, 3))
        quoted = f'"{file_value}"' if isinstance(file_value, str) else file_value
        path = write(tmp_path, f"{name} = {quoted}\n")
        env = {ENV[name]: str(env_value)}
        from_file = getattr(load({}, env={}, path=path), name)
        from_env = getattr(load({}, env=env, path=path), name)
        from_flag = getattr(load({name: str(flag_value)}, env=env, path=path), name)
        assert len({repr(v) for v in (from_file, from_env, from_flag)}) == 3, name
        assert from_flag == getattr(load({name: str(flag_value)}, env={}, path=NO_FILE), name)


def test_sizes_and_durations_are_read_as_a_user_types_them():
    settings = load(
        {"prompt_cache": "0", "keep_alive": "-1"},
        env={"LOCALSERVE_MEMORY_BUDGET": "4GiB", "LOCALSERVE_LOAD_TIMEOUT": "2.5"},
        path=NO_FILE,
    )
    assert settings.prompt_cache == 0
    assert settings.keep_alive is None, "a negative keep-alive keeps models for ever"
    assert settings.memory_budget == {"cpu": 4 << 30}, "a single size is the CPU's budget"
    assert settings.load_timeout == 2.5


def test_a_memory_budget_may_name_each_device():
    settings = load({"memory_budget": "cpu=12GiB, gpu0=512MiB"}, env={}, path=NO_FILE)
    assert settings.memory_budget == {"cpu": 12 << 30, "gpu0": 512 << 20}


def test_max_tokens_caps_every_model_or_each_by_its_name(tmp_path):
    assert load({}, env={}, path=NO_FILE).max_tokens is None
    settings = load({"max_tokens": "512, gemma3=64"}, env={}, path=NO_FILE)
    assert settings.max_tokens == {"*": 512, "gemma3": 64}
    only = load({}, env={"LOCALSERVE_MAX_TOKENS": "gemma3=8"}, path=NO_FILE)
    assert only.max_tokens == {"gemma3": 8}
    table = write(tmp_path, 'max_tokens = {"*" = 100, gemma3 = 9}\n')
    assert load({}, env={}, path=table).max_tokens == {"*": 100, "gemma3": 9}


def test_draft_model_names_each_model_its_draft(tmp_path):
    assert load({}, env={}, path=NO_FILE).draft_model is None
    settings = load({"draft_model": "Qwen3=qwen3-small, gemma3=gemma3"}, env={}, path=NO_FILE)
    assert settings.draft_model == {"qwen3": "qwen3-small", "gemma3": "gemma3"}
    table = write(tmp_path, 'draft_model = {smollm2 = "/m/draft.gguf"}\n')
    assert load({}, env={}, path=table).draft_model == {"smollm2": "/m/draft.gguf"}


def test_alias_names_the_model_each_alias_stands_for(tmp_path):
    assert load({}, env={}, path=NO_FILE).alias is None
    settings = load({"alias": "Claude-Sonnet-4-5=gemma3, gpt-5=smollm2"}, env={}, path=NO_FILE)
    assert settings.alias == {"claude-sonnet-4-5": "gemma3", "gpt-5": "smollm2"}
    table = write(tmp_path, 'alias = { claude-haiku-4-5 = "smollm2" }\n')
    assert load({}, env={}, path=table).alias == {"claude-haiku-4-5": "smollm2"}


def test_gpu_layers_is_auto_unless_a_count_is_given():
    assert load({}, env={}, path=NO_FILE).gpu_layers is None
    assert load({"gpu_layers": "auto"}, env={}, path=NO_FILE).gpu_layers is None
    assert load({"gpu_layers": "12"}, env={}, path=NO_FILE).gpu_layers == 12


def test_ollamas_kv_cache_and_flash_attention_variables_are_read_where_ours_are_not_set():
    env = {"OLLAMA_KV_CACHE_TYPE": "q8_0", "OLLAMA_FLASH_ATTENTION": "1"}
    settings = load({}, env=env, path=NO_FILE)
    assert (settings.kv_cache_type, settings.flash_attention) == ({"*": "q8_0"}, {"*": "on"})
    ours = {**env, "LOCALSERVE_KV_CACHE_TYPE": "q4_0,gemma3=f16"}
    assert load({}, env=ours, path=NO_FILE).kv_cache_type == {"*": "q4_0", "gemma3": "f16"}
    with pytest.raises(ConfigError, match=r"\$OLLAMA_KV_CACHE_TYPE"):
        load({}, env={"OLLAMA_KV_CACHE_TYPE": "q5_1"}, path=NO_FILE)


@pytest.mark.parametrize(
    "name,bad",
    [
        ("parallel", "four"),
        ("draft_model", "smollm2"),
        ("prompt_cache", "lots"),
        ("keep_alive", "soon"),
        ("port", "70000"),
        ("memory_budget", "gpu0="),
        ("gpu_layers", "many"),
        ("max_tokens", "gemma3=0"),
        ("max_tokens", "lots"),
        ("parallel", "9" * 400),
        ("threads", str(1 << 31)),
        ("ctx", "1e400"),
        ("header_timeout", "nan"),
        ("idle_timeout", "1e400"),
        ("max_body", "1e400GiB"),
        ("prompt_cache", "9" * 30 + "GiB"),
        ("memory_budget", "nan"),
    ],
)
def test_a_value_of_the_wrong_kind_is_refused_naming_the_flag(name: str, bad: str):
    with pytest.raises(ConfigError, match=f"--{name.replace('_', '-')}"):
        load({name: bad}, env={}, path=NO_FILE)


def test_every_serve_flag_is_a_setting():
    import argparse

    from localserve.cli.serve import add_serve_arguments

    parser = argparse.ArgumentParser()
    add_serve_arguments(parser)
    flags = {a.dest for a in parser._actions if a.option_strings} - {"help"}
    assert flags - {"model", "no_default_model", "verbose"} == set(NAMES)


def test_the_readme_lists_every_setting_with_its_flag_variable_and_default():
    readme = (REPO / "README.md").read_text()
    missing = [row for row in (readme_row(*d) for d in describe()) if row not in readme]
    assert not missing, "README.md's settings table is stale; it should hold:\n" + "\n".join(
        missing
    )
