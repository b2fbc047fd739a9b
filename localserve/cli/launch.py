"""`localserve launch AGENT [--model NAME] [--print] [-- ARGS]`: a coding agent pointed at this
daemon, as `ollama launch` and `lemonade launch` do.

It starts the daemon if need be, pulls and loads the model, reads the context the model loaded
with, and then gives the agent its configuration in the agent's own documented form: environment
variables, command-line flags, or a file in localserve's config folder (`agents/`). Each carries
the base URL, a key, the model, and the context and output limits the agent must keep to. The
key is the daemon's `api_key` (from the flag, LOCALSERVE_API_KEY or config.toml, as the daemon
reads it), checked against the daemon before the agent starts; with none, any text does. For
Claude Code it also sets the variables that keep its prompt prefix the same from turn to turn
(no per-request attribution line), so that every turn after the first starts from cached cells.
It then runs the agent in this terminal; `--print` prints the environment and the command
instead, as lines a shell (or a test) can run verbatim.

An agent whose first prompt cannot fit the loaded context is not started: the message says how
large the prompt is, what is loaded, and which setting gives more. `--model` may name an alias:
the agent is given the alias, and the context is that of the model it stands for.
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import shlex
import shutil
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

from localserve.cli.common import Failure, address_options, connect
from localserve.cli.output import FAILED, OK, UNREACHABLE
from localserve.cli.run import ensure_daemon, ensure_model
from localserve.client import JSON, bare_name
from localserve.ground import settings as config
from localserve.launcher import DaemonDidNotStart

DEFAULT_MODEL = "smollm2"
# An answer's cap: a quarter of the context, at most this many tokens.
MAX_OUTPUT = 8192
# The key an agent sends a daemon that takes any: some agents insist on one.
ANY_KEY = "localserve"
# The variable a keyed daemon's key reaches Codex in: its providers read keys from variables.
KEY_ENV = "LOCALSERVE_API_KEY"


@dataclass(frozen=True)
class Setup:
    """What every agent's configuration is made of."""

    url: str  # the daemon's base URL, no trailing slash
    key: str  # what the agent sends as its API key
    keyed: bool  # whether the daemon wants that key: an agent that sends none must be given it
    model: str
    context: int  # the context per slot the model loaded with
    output: int  # the answer cap the agent should ask for
    folder: Path  # where configuration files go


@dataclass(frozen=True)
class Agent:
    program: str
    install: str  # how to install it, for the message when it is missing
    # Tokens of its first request's prompt, measured with Gemma 3's tokenizer, rounded up: the
    # least context it can start in.
    first_prompt: int
    env: Callable[[Setup], dict[str, str]]
    args: Callable[[Setup], list[str]] = lambda s: []
    files: Callable[[Setup], dict[str, str]] = lambda s: {}


def _claude_env(s: Setup) -> dict[str, str]:
    return {
        "ANTHROPIC_BASE_URL": s.url,
        "ANTHROPIC_API_KEY": s.key,
        "ANTHROPIC_MODEL": s.model,
        "ANTHROPIC_DEFAULT_OPUS_MODEL": s.model,
        "ANTHROPIC_DEFAULT_SONNET_MODEL": s.model,
        "ANTHROPIC_DEFAULT_HAIKU_MODEL": s.model,
        "CLAUDE_CODE_SUBAGENT_MODEL": s.model,
        "CLAUDE_CODE_MAX_OUTPUT_TOKENS": str(s.output),
        # No attribution line that differs per request at the head of the prompt.
        "CLAUDE_CODE_ATTRIBUTION_HEADER": "0",
        "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
    }


def _codex_env(s: Setup) -> dict[str, str]:
    return {KEY_ENV: s.key} if s.keyed else {"CODEX_OSS_BASE_URL": f"{s.url}/v1"}


def _codex_args(s: Setup) -> list[str]:
    limits = ["-c", f"model_context_window={s.context}"]
    limits += ["-c", f"model_max_output_tokens={s.output}"]
    if not s.keyed:
        # Codex's own Ollama mode: it finds the model in /api/tags (and pulls it if missing).
        return ["--oss", "--local-provider", "ollama", "-m", s.model, *limits]
    # That mode's built-in provider sends no key, and no setting changes a built-in provider
    # (Codex keeps its own where a configured one has the same name): a keyed daemon is a
    # provider of its own, whose key Codex reads from KEY_ENV. Values are TOML, as -c reads them.
    provider = {"name": "localserve", "base_url": f"{s.url}/v1", "env_key": KEY_ENV}
    provider["wire_api"] = "responses"
    settings = ['model_provider="localserve"']
    settings += [f"model_providers.localserve.{k}={json.dumps(v)}" for k, v in provider.items()]
    return [*(part for one in settings for part in ("-c", one)), "-m", s.model, *limits]


def _opencode_env(s: Setup) -> dict[str, str]:
    provider = {
        "npm": "@ai-sdk/openai-compatible",
        "name": "localserve",
        "options": {"baseURL": f"{s.url}/v1", "apiKey": s.key},
        "models": {s.model: {"limit": {"context": s.context, "output": s.output}}},
    }
    content = {"provider": {"localserve": provider}, "model": f"localserve/{s.model}"}
    return {"OPENCODE_CONFIG_CONTENT": json.dumps(content)}


def _continue_file(s: Setup) -> dict[str, str]:
    model = {
        "name": s.model,
        "provider": "ollama",
        "model": s.model,
        "apiBase": s.url,
        # Continue's Ollama provider sends it as a bearer token; the file is this user's alone.
        "apiKey": s.key,
        "roles": ["chat", "edit", "apply"],
        "defaultCompletionOptions": {"contextLength": s.context, "maxTokens": s.output},
    }
    # JSON is YAML: no YAML writer needed.
    config_ = {"name": "localserve", "version": "1.0.0", "schema": "v1", "models": [model]}
    return {"continue.yaml": json.dumps(config_, indent=2)}


def _aider_files(s: Setup) -> dict[str, str]:
    name = f"ollama_chat/{s.model}"
    settings = [{"name": name, "extra_params": {"num_ctx": s.context}}]
    metadata = {
        name: {
            "max_input_tokens": s.context,
            "max_output_tokens": s.output,
            "max_tokens": s.output,
            "input_cost_per_token": 0,
            "output_cost_per_token": 0,
            "litellm_provider": "ollama_chat",
            "mode": "chat",
        }
    }
    return {
        "aider.model.settings.yml": json.dumps(settings),
        "aider.model.json": json.dumps(metadata),
    }


AGENTS: dict[str, Agent] = {
    "claude": Agent(
        "claude",
        "npm install -g @anthropic-ai/claude-code",
        12_000,
        _claude_env,
        lambda s: ["--model", s.model],
    ),
    "codex": Agent(
        "codex",
        "npm install -g @openai/codex",
        9_000,
        _codex_env,
        _codex_args,
    ),
    "opencode": Agent("opencode", "npm install -g opencode-ai", 8_000, _opencode_env),
    "qwen": Agent(
        "qwen",
        "npm install -g @qwen-code/qwen-code",
        14_000,
        lambda s: {
            "OPENAI_BASE_URL": f"{s.url}/v1",
            "OPENAI_API_KEY": s.key,
            "OPENAI_MODEL": s.model,
            # Without it Qwen Code asks an unknown model for 32,000 tokens.
            "QWEN_CODE_MAX_OUTPUT_TOKENS": str(s.output),
        },
        lambda s: ["--auth-type", "openai"],
    ),
    "continue": Agent(
        "cn",
        "npm install -g @continuedev/cli",
        4_000,
        lambda s: {},
        lambda s: ["--config", str(s.folder / "continue.yaml")],
        _continue_file,
    ),
    "aider": Agent(
        "aider",
        "pip install aider-chat",
        4_000,
        lambda s: {"OLLAMA_API_BASE": s.url, "OLLAMA_API_KEY": s.key},
        lambda s: [
            "--model",
            f"ollama_chat/{s.model}",
            "--model-settings-file",
            str(s.folder / "aider.model.settings.yml"),
            "--model-metadata-file",
            str(s.folder / "aider.model.json"),
        ],
        _aider_files,
    ),
}


def add_parser(sub: argparse._SubParsersAction) -> None:
    launch = sub.add_parser(
        "launch",
        parents=[address_options()],
        help="start a coding agent pointed at this daemon",
        description="Configure a coding agent for this daemon (base URL, key, model, context "
        "and output limits) and start it. Arguments after `--` go to the agent.",
    )
    launch.add_argument("agent", choices=sorted(AGENTS), help="the agent")
    launch.add_argument(
        "--model", default=DEFAULT_MODEL, help=f"the model it uses (default {DEFAULT_MODEL})"
    )
    launch.add_argument(
        "--max-output",
        type=int,
        metavar="TOKENS",
        help=f"the answer cap the agent asks for (default: a quarter of the model's context, at "
        f"most {MAX_OUTPUT}); Codex sends none, so give the daemon --max-tokens for it",
    )
    launch.add_argument(
        "--print",
        action="store_true",
        dest="print_only",
        help="print the environment and the command instead of running the agent",
    )
    # What follows `--` goes to the agent: cli/__init__.py's `parse` puts it in agent_args.
    launch.set_defaults(handler=launch_command, agent_args=[])


def launch_command(args: argparse.Namespace) -> int:
    settings, client = connect(args)
    agent = AGENTS[args.agent]
    try:
        ensure_daemon(client, settings)
    except DaemonDidNotStart as exc:
        raise Failure(str(exc), UNREACHABLE) from exc
    loaded = ensure_model(client, args.model, None)
    context = loaded_context(loaded, client.ps, args.model)
    setup = _setup(settings, args.model, agent, context, args.max_output)
    check_key(setup)
    setup.folder.mkdir(parents=True, exist_ok=True)
    for name, text in agent.files(setup).items():
        write_private(setup.folder / name, text + "\n")
    env = agent.env(setup)
    # The agent's own arguments first (a subcommand such as `codex exec` must lead), then ours.
    command = [agent.program, *args.agent_args, *agent.args(setup)]
    if args.print_only:
        for name, value in env.items():
            print(f"export {name}={shlex.quote(value)}")
        print(shlex.join(command))
        return OK
    program = shutil.which(agent.program)
    if program is None:
        raise Failure(f"{agent.program} is not installed: {agent.install}", FAILED)
    sys.stdout.flush()
    os.execvpe(program, command, {**os.environ, **env})
    return OK  # not reached: the agent replaced this process


def loaded_context(load: JSON, running: Callable[[], list[JSON]], model: str) -> int:
    """The context a slot of `model` loaded with: the load's answer gives it, under the name of
    the model an alias stands for (/api/ps lists that name, never the alias); /api/ps is asked
    only where the answer lacks it."""
    if isinstance(load.get("context_length"), int):
        return int(load["context_length"])
    names = {bare_name(str(load.get("name") or model)), bare_name(model)}
    found = [m for m in running() if bare_name(str(m.get("name", ""))) in names]
    return int(found[0].get("context_length") or 0) if found else 0


def _setup(
    settings: config.Settings, model: str, agent: Agent, context: int, cap: int | None
) -> Setup:
    if context < agent.first_prompt + 256:
        raise Failure(
            f"{agent.program}'s first prompt takes about {agent.first_prompt:,} tokens, but "
            f"'{model}' is loaded with {context:,} tokens a slot: start the daemon with a "
            f"larger --ctx (or a larger --memory-budget, which an automatic context grows "
            "into), or use a model trained for a longer context",
            FAILED,
        )
    output = cap or max(256, min(MAX_OUTPUT, context // 4))
    folder = config.config_path().parent / "agents"
    key = settings.api_key or None
    return Setup(settings.url, key or ANY_KEY, key is not None, model, context, output, folder)


def check_key(s: Setup) -> None:
    """The key the agent will send opens the daemon: a daemon started with an --api-key this
    CLI was not given would refuse every request of the agent's, after it started."""
    url = urlsplit(s.url)
    conn = http.client.HTTPConnection(url.hostname or "127.0.0.1", url.port or 80, timeout=30)
    try:
        conn.request("GET", "/api/ps", headers={"Authorization": f"Bearer {s.key}"})
        status = conn.getresponse().status
    except (OSError, http.client.HTTPException):
        return  # it answered the load a moment ago: the agent will say what became of it
    finally:
        conn.close()
    if status == 401:
        raise Failure(
            f"the daemon at {s.url} wants an API key that this command was not given: set "
            "LOCALSERVE_API_KEY (or api_key in config.toml) to the daemon's key, and launch "
            "hands it to the agent",
            FAILED,
        )


def write_private(path: Path, text: str) -> None:
    """A file only this user can read: an agent's configuration may hold the daemon's key."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        f.write(text)
    path.chmod(0o600)  # a file left by an earlier launch keeps its mode otherwise
