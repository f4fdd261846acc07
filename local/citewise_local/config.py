"""Where each value of a `citewise` option comes from: the flag, else the environment, else the config
file, else the default.

The config file is optional TOML: `./citewise.toml` if the working directory has one (a project's own
settings), else `config.toml` in the home (`--home`, else `$CITEWISE_HOME`, else `~/.citewise`). Only
one file is read. Its top-level keys are option names that every command taking them uses (`tenant`,
`user`, `group`); a table per command holds that command's options (`[query]`, `[eval]`, `[docs.list]`);
and `[settings]` holds the `CITEWISE_*` settings by their lower-case names without the prefix. Option
names are the long flags' (`top-k` or `top_k`). A key that no command knows, or a value its option would
refuse, fails with the file and the key named: a typo in a config file should not be silently ignored.

The environment gives `CITEWISE_TENANT` and `CITEWISE_USER` (the identity options) and, as always, every
`CITEWISE_*` setting.
"""

from __future__ import annotations

import argparse
import os
import tomllib
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from citewise.domain.errors import ValidationError
from citewise.runtime.settings import McpSettings

LOCAL_CONFIG = Path("citewise.toml")
"""The project's config file, looked for in the working directory first."""
HOME_CONFIG = "config.toml"
"""The config file inside the home, read when the working directory has none."""
DEFAULT_HOME = Path("~/.citewise")
ENV_OPTIONS: dict[str, str] = {"tenant": "CITEWISE_TENANT", "user": "CITEWISE_USER"}
"""Options whose default an environment variable gives (above the config file, below the flag)."""
REQUIRED_OPTIONS: dict[str, str] = {"tenant": "--tenant"}
"""Options a command needs from one of the sources; argparse cannot require them itself, since the
environment or the file may give them."""
SETTINGS_TABLE = "settings"

PRECEDENCE = """\
where option values come from, first found wins: the flag, the environment, the config file, the default
  environment: CITEWISE_TENANT, CITEWISE_USER, CITEWISE_HOME and every other CITEWISE_* setting
  config file: ./citewise.toml, else $CITEWISE_HOME/config.toml (TOML), e.g.
    tenant = "acme"          # --tenant of every command that has it; also user, group
    [query]                  # one command's options (long names): [query], [eval], [docs.list], ...
    top_k = 8
    [settings]               # CITEWISE_* settings, lower case without the prefix
    embedder = "hashing"
"""
"""The rule, as the help's epilog and the README state it."""


@dataclass(frozen=True)
class ConfigFile:
    """A parsed config file; `path` None when there is none (every part empty)."""

    path: Path | None = None
    options: dict[str, Any] = field(default_factory=dict)
    commands: dict[str, dict[str, Any]] = field(default_factory=dict)
    settings: dict[str, Any] = field(default_factory=dict)


def parse(parser: argparse.ArgumentParser, arguments: list[str]) -> tuple[argparse.Namespace, dict[str, object]]:
    """The command line parsed with every source's defaults in place, and the settings to load (the
    file's `[settings]` below the environment, `--home` above it). ValidationError for a bad config file;
    a usage error (argparse's exit 2) for a missing required option.

    When a shell asks for completions (the script `citewise completion` prints sets `_ARGCOMPLETE`),
    argcomplete answers from this same parser and exits: imported only then, it costs a command nothing.
    """
    environ = environment()
    found = load_config(find_config(Path.cwd(), home_from(arguments, environ)))
    apply_defaults(parser, found, environ)
    overrides = settings_overrides(found, environ, McpSettings.model_fields)
    if "_ARGCOMPLETE" in environ:
        import argcomplete

        argcomplete.autocomplete(parser)
    args = parser.parse_args(arguments)
    if problem := missing_required(args):
        parser.error(problem)
    if args.home is not None:
        overrides["home"] = args.home
    return args, overrides


def environment() -> Mapping[str, str]:
    """The process environment, read in this one place."""
    return os.environ


def home_from(argv: list[str], environ: Mapping[str, str]) -> Path:
    """The home the command will use, read before the full parse: the config file may live there.

    `--home` is accepted anywhere on the line, so it is found with a parser that knows only it.
    """
    early = argparse.ArgumentParser(add_help=False)
    early.add_argument("--home", type=Path)
    known, _ = early.parse_known_args(argv)
    return Path(known.home or environ.get("CITEWISE_HOME") or DEFAULT_HOME).expanduser()


def find_config(cwd: Path, home: Path) -> Path | None:
    """The config file to read: `./citewise.toml`, else `<home>/config.toml`, else none."""
    for candidate in (cwd / LOCAL_CONFIG, home / HOME_CONFIG):
        if candidate.is_file():
            return candidate
    return None


def load_config(path: Path | None) -> ConfigFile:
    """Parse the file into its three parts (see the module docstring); ValidationError names the file."""
    if path is None:
        return ConfigFile()
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise ValidationError(f"config file {path}: {exc}") from exc
    settings = data.pop(SETTINGS_TABLE, {})
    if not isinstance(settings, dict):
        raise ValidationError(f"config file {path}: [{SETTINGS_TABLE}] must be a table")
    commands = {key: value for key, value in data.items() if isinstance(value, dict)}
    options = {_dest(key): value for key, value in data.items() if key not in commands}
    if "home" in options:  # it would outrank CITEWISE_HOME as a default of --home
        raise ValidationError(f"config file {path}: home is a setting: put it under [{SETTINGS_TABLE}]")
    return ConfigFile(path, options, commands, settings)


def apply_defaults(parser: argparse.ArgumentParser, config: ConfigFile, environ: Mapping[str, str]) -> None:
    """Make the environment's and the file's values the defaults of the options they name, so a flag
    given on the line still wins; ValidationError for a key no command has or a value it refuses."""
    commands = dict(subcommands(parser))
    unknown_options = set(config.options)
    for name, sub in commands.items():
        actions = {action.dest: action for action in sub._actions if action.option_strings}
        defaults: dict[str, Any] = {}
        for dest, value in config.options.items():
            if dest in actions:
                defaults[dest] = _checked(actions[dest], value, f"{config.path}: {dest}")
                unknown_options.discard(dest)
        table = _table(config, name)
        for key, value in table.items():
            dest = _dest(key)
            if dest not in actions:
                raise ValidationError(
                    f"config file {config.path}: [{name}] has no option {key!r}; it has: "
                    + ", ".join(sorted(d for d in actions if d != "help"))
                )
            defaults[dest] = _checked(actions[dest], value, f"{config.path}: [{name}] {key}")
        for dest, variable in ENV_OPTIONS.items():
            if dest in actions and environ.get(variable):
                defaults[dest] = environ[variable]
        sub.set_defaults(**defaults)
    if unknown_options:
        raise ValidationError(
            f"config file {config.path}: no command has an option {sorted(unknown_options)[0]!r} "
            "(options for one command go in its table, e.g. [query]; CITEWISE_* settings in [settings])"
        )
    tables = {name for name in _tables(config.commands)}
    if stray := sorted(tables - set(commands)):
        raise ValidationError(
            f"config file {config.path}: no command {stray[0]!r}; the commands are: " + ", ".join(sorted(commands))
        )


def missing_required(args: argparse.Namespace) -> str | None:
    """The message for a required option no source gave, else None."""
    if getattr(args, "operator", False) or getattr(args, "all_tenants", False):
        return None  # `citewise token --operator`, `usage --all-tenants`: the operator's, of no tenant
    for dest, flag in REQUIRED_OPTIONS.items():
        if hasattr(args, dest) and getattr(args, dest) is None:
            variable = ENV_OPTIONS.get(dest)
            sources = f", {variable}" if variable else ""
            return f"{flag} is required (give the flag{sources}, or {dest} in citewise.toml)"
    return None


def settings_overrides(config: ConfigFile, environ: Mapping[str, str], known: Mapping[str, Any]) -> dict[str, object]:
    """The file's settings that no `CITEWISE_*` variable sets (the environment wins), ready for
    `load_settings(**...)`; a name that is not a setting fails, listing the ones there are."""
    set_by_env = {name.upper() for name in environ}
    unknown = sorted(set(config.settings) - set(known))
    if unknown:
        raise ValidationError(
            f"config file {config.path}: [{SETTINGS_TABLE}] has no setting {unknown[0]!r}; settings are: "
            + ", ".join(sorted(known))
        )
    return {name: value for name, value in config.settings.items() if f"CITEWISE_{name.upper()}" not in set_by_env}


def subcommands(parser: argparse.ArgumentParser, prefix: str = "") -> Iterator[tuple[str, argparse.ArgumentParser]]:
    """Every command's parser, by its name as typed (`query`, `docs list`), the groups' own included."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                full = f"{prefix}{name}"
                yield full, sub
                yield from subcommands(sub, f"{full} ")


def add_everywhere(parser: argparse.ArgumentParser, *flags: str, **kwargs: Any) -> None:
    """Add an option to the top parser and to every command, so it may come before or after the command.

    In the commands its default is SUPPRESS: a command that was not given it leaves the top parser's
    value alone instead of overwriting it with its own default.
    """
    parser.add_argument(*flags, **kwargs)
    for _, sub in subcommands(parser):
        sub.add_argument(*flags, **{**kwargs, "default": argparse.SUPPRESS})


def _table(config: ConfigFile, name: str) -> dict[str, Any]:
    """The table of the command `name` (`docs list` is `[docs.list]`), without its sub-tables."""
    table: Any = config.commands
    for part in name.split(" "):
        table = table.get(part, {}) if isinstance(table, dict) else {}
    return {key: value for key, value in table.items() if not isinstance(value, dict)}


def _tables(commands: dict[str, Any], prefix: str = "") -> Iterator[str]:
    for name, value in commands.items():
        if isinstance(value, dict):
            yield f"{prefix}{name}"
            yield from _tables(value, f"{prefix}{name} ")


def _dest(key: str) -> str:
    return key.replace("-", "_")


def _checked(action: argparse.Action, value: Any, where: str) -> Any:
    """The file's value as the flag would have given it: converted by the option's type, one of its
    choices; a flag without argument takes true or false, a repeatable one a list."""
    if action.nargs == 0:
        if not isinstance(value, bool):
            raise ValidationError(f"config file {where}: must be true or false")
        return value
    if isinstance(action, argparse._AppendAction):
        if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
            raise ValidationError(f"config file {where}: must be a list of strings")
        return value
    if isinstance(value, bool) or not isinstance(value, str | int | float):
        raise ValidationError(f"config file {where}: must be a string or a number")
    converted: Any = value
    if callable(action.type):
        try:
            converted = action.type(str(value))
        except (argparse.ArgumentTypeError, ValueError) as exc:
            raise ValidationError(f"config file {where}: {exc}") from exc
    if action.choices is not None and converted not in action.choices:
        raise ValidationError(f"config file {where}: must be one of " + ", ".join(map(str, action.choices)))
    return converted
