"""What the ``converge`` commands share: parent parsers of the common flags (``--app``, stores,
checkpoints, locks, ``--json``, times), time, duration and retention-rule arguments, ``MODULE:ATTR``
loading, the app's settings from the flags, ``--json`` output, the one-line errors and the error
wrapper.

Times: ONE rule for every ``--since``/``--until``: an ISO-8601 time (UTC
unless it carries an offset), epoch seconds, or a time relative to now
(``30m ago``, ``2h ago``, ``7d ago``; units s, m, h, d, w). Commands convert
the epoch seconds to whatever they need internally.

Errors: a command raises ``UserError`` for bad input (exit status 2) and may
let any other exception escape; ``run_command`` prints it as ONE line on
stderr (``converge dlq list: error: ...``) and returns a non-zero status.
``CONVERGE_DEBUG=1`` (the ``debug`` setting) lets exceptions through with their traceback.

Parent parsers: ``app_flag``, ``store_flag``, ``data_dir_flag``, ``env_store_flag``, ``index_flags``,
``checkpoints_flag``, ``turn_flags``, ``json_flag`` and ``window_flags`` each return a parser without help to
pass as ``parents=[...]`` to ``add_parser``, so a flag reads the same in every command.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Callable, Sequence
from typing import Any, NoReturn

from framework.core import durations
from framework.core.dlq_retention import DeadLetterRetention
from framework.core.durations import DURATION_HELP, TIME_HELP
from framework.core.errors import ConvergeError
from framework.core.extras import missing_extra
from framework.settings import ENV, env_setting

__all__ = [
    "app_flag",
    "store_flag",
    "index_flags",
    "data_dir_flag",
    "checkpoints_flag",
    "env_store_flag",
    "checkpoints_url",
    "locks_url",
    "turn_flags",
    "json_flag",
    "window_flags",
    "settings_of",
    "app_declaring",
    "store_beside",
    "open_existing_store",
    "UserError",
    "CliParser",
    "parse_time",
    "time_arg",
    "parse_duration",
    "retention_rules",
    "load_spec",
    "add_json_flag",
    "print_json",
    "run_command",
    "one_line",
    "leaf_prog",
    "DEBUG_ENV",
    "DURATION_HELP",
]

#: Set to 1 to see tracebacks instead of one-line errors.
DEBUG_ENV = ENV["debug"]


class UserError(ConvergeError):
    """Bad input the user can fix: printed as one line, exit status 2."""


class CliParser(argparse.ArgumentParser):
    """An ArgumentParser whose usage errors are one line (``converge worker: error: ... (see --help)``)."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


def parse_duration(text: str) -> float:
    """Seconds in ``90``, ``30s``, ``15m``, ``2h``, ``7d`` or ``1w``; ArgumentTypeError otherwise."""
    try:
        return durations.parse_duration(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def retention_rules(text: str) -> DeadLetterRetention:
    """The ``dlq_retention`` rules in ``text``; ArgumentTypeError otherwise."""
    try:
        return DeadLetterRetention.parse(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def parse_time(text: str, now: float | None = None) -> float:
    """Epoch seconds of ``text`` (``durations.parse_time``); ArgumentTypeError when it is no time."""
    try:
        return durations.parse_time(text, now)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def time_arg(text: str) -> float:
    """``parse_time`` relative to the current time: an argparse ``type``."""
    return parse_time(text)


def load_spec(spec: str, what: str = "--app") -> Any:
    """The object ``MODULE:ATTR`` names (the working directory is importable); UserError naming
    ``what`` when the spec is malformed or the module or attribute is missing."""
    from framework.worker.loading import load_object

    try:
        return load_object(spec)
    except ValueError as exc:
        raise UserError(f"{what}: {exc}") from None
    except ModuleNotFoundError as exc:
        module = spec.partition(":")[0]
        if exc.name and (module == exc.name or module.startswith(exc.name + ".")):
            where = f"not importable from {os.getcwd()}: run it from the app's directory"
            raise UserError(f"{what} {spec}: no module named {exc.name!r} ({where})") from None
        raise UserError(f"{what} {spec}: importing it failed: {exc}") from None
    except AttributeError as exc:
        raise UserError(f"{what} {spec}: {exc}") from None


def add_json_flag(parser: argparse.ArgumentParser, text: str = "print JSON instead of a table") -> None:
    """The ``--json`` flag of a listing command."""
    parser.add_argument("--json", action="store_true", help=text)


def print_json(value: Any) -> None:
    """``value`` as one JSON document on stdout (paths, sets and other objects as strings)."""
    print(json.dumps(value, default=lambda o: sorted(o) if isinstance(o, set | frozenset) else str(o)))


def one_line(exc: BaseException) -> str:
    """The message of ``exc`` on one line (its type name when it has no message)."""
    text = " ".join(str(exc).split())
    if isinstance(exc, KeyError | ModuleNotFoundError) or not text:
        text = f"{type(exc).__name__}: {text}" if text else type(exc).__name__
    return text


def run_command(func: Callable[[argparse.Namespace], int], args: argparse.Namespace, prog: str) -> int:
    """Run one command: its status, or 1 (2 for a UserError) after one error line on stderr."""
    if env_setting("debug") == "1":
        return func(args)
    try:
        return func(args)
    except UserError as exc:
        _error(prog, one_line(exc))
        return 2
    except KeyboardInterrupt:
        _error(prog, "interrupted")
        return 130
    except BrokenPipeError:  # e.g. `converge dlq show --json | head`: stop quietly
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    except SystemExit as exc:
        if exc.code is None or isinstance(exc.code, int):
            raise
        _error(prog, one_line(Exception(exc.code)).removeprefix(f"{prog}: "))
        return 1
    except (ConvergeError, OSError, ValueError, ImportError) as exc:  # expected failures, clear messages
        _error(prog, one_line(missing_extra(exc) or exc))  # a missing extra: which one to install
        return 1
    except Exception as exc:  # noqa: BLE001 - one line, never a traceback
        _error(prog, f"{type(exc).__name__}: {one_line(exc)} (set {DEBUG_ENV}=1 for the traceback)")
        return 1


def leaf_prog(parser: argparse.ArgumentParser, argv: Sequence[str]) -> str:
    """The ``prog`` of the deepest subcommand ``argv`` names (``converge dlq list``)."""
    current = parser
    for token in argv:
        actions = [a for a in current._actions if isinstance(a, argparse._SubParsersAction)]
        if not actions or token not in actions[0].choices:
            if token.startswith("-"):
                continue
            break
        current = actions[0].choices[token]
    return current.prog


def _error(prog: str, message: str) -> None:
    print(f"{prog}: error: {message}", file=sys.stderr)


# -- parent parsers of the common flags -------------------------------------------------------

CHECKPOINTS_HELP = (
    f"sqlite:///PATH or zookeeper://HOSTS/ROOT (env {ENV['checkpoints']}; default: checkpoints.db beside "
    "a SQLite store)"
)


def _parent() -> CliParser:
    return CliParser(add_help=False)


def app_flag(text: str = "the converge App", *, required: bool = True) -> CliParser:
    """``--app MODULE:ATTR``."""
    p = _parent()
    p.add_argument("--app", required=required, default=None, metavar="MODULE:ATTR", help=text)
    return p


def store_flag(text: str = "sqlite:///PATH or cassandra://HOST/KEYSPACE") -> CliParser:
    """``--wide-store URL`` (default: the app's settings)."""
    p = _parent()
    p.add_argument("--wide-store", default=None, help=text)
    return p


def data_dir_flag(
    text: str = "the app's data dir, as the worker's --data-dir: a SQLite store defaults to wide.db "
    "there (env CONVERGE_DATA_DIR, default var/<app id>)",
) -> CliParser:
    """``--data-dir DIR``: where the app's data is (``framework.settings.Settings``: the ``data_dir``
    setting, which the wide store and the dead-letter WAL default into), so that every command of
    an app given the same flags as its worker reads the worker's store."""
    p = _parent()
    p.add_argument("--data-dir", default=None, help=text)
    return p


def index_flags(text: str = f"http://HOST:PORT of the index (env {ENV['es_url']})") -> CliParser:
    """``--es-url URL`` and ``--es-tombstones {native,document}``."""
    p = _parent()
    p.add_argument("--es-url", default=None, help=text)
    p.add_argument("--es-tombstones", choices=("native", "document"), default=None)
    return p


def env_store_flag(text: str) -> CliParser:
    """``--wide-store URL`` defaulting to the ``wide_store`` setting, required without one."""
    p = _parent()
    store = env_setting("wide_store")
    p.add_argument(
        "--wide-store",
        default=store,
        required=store is None,
        help=f"{text}: sqlite:///PATH or cassandra://HOST/KEYSPACE (env {ENV['wide_store']})",
    )
    return p


def checkpoints_flag(text: str = CHECKPOINTS_HELP, default: str | None = None) -> CliParser:
    """``--checkpoints URL``."""
    p = _parent()
    p.add_argument("--checkpoints", default=default, help=text)
    return p


def turn_flags(job: str, locks_default: str = "beside the store") -> CliParser:
    """The flags of one coordinated turn of ``job``: its lock URL (``locks_default`` says where it
    is without one), predecessor, first job of a new domain, and a fixed clock for tests (``--now``)."""
    p = _parent()
    p.add_argument(
        "--locks", default=None, help=f"job lock URL (env {ENV['job_locks']}; default: {locks_default})"
    )
    p.add_argument("--predecessor", default=None, help=f"the job whose turn comes right before {job}'s")
    p.add_argument("--start-with", default=None, help="the job taking the first turn of a new domain")
    p.add_argument("--now", type=float, default=None, help=argparse.SUPPRESS)
    return p


def json_flag(text: str = "print JSON instead of a table") -> CliParser:
    """``--json``."""
    p = _parent()
    add_json_flag(p, text)
    return p


def window_flags(what: str) -> CliParser:
    """``--since`` and ``--until`` (epoch seconds); ``what`` says what is compared, e.g. ``parked``."""
    p = _parent()
    p.add_argument("--since", type=time_arg, default=None, help=f"{what} at or after: {TIME_HELP}")
    p.add_argument("--until", type=time_arg, default=None, help=f"{what} before: {TIME_HELP}")
    return p


# -- the app, its settings and its stores -----------------------------------------------------


def settings_of(args: argparse.Namespace, app_id: str | None) -> Any:
    """``framework.settings.Settings`` of ``app_id`` with every settings flag ``args`` has."""
    from framework.settings import Settings

    flags = {name: getattr(args, name) for name in ENV if getattr(args, name, None) is not None}
    return Settings.resolve(app_id, **flags)


def app_declaring(spec: str, attribute: str, example: str) -> Any:
    """The converge ``App`` named by ``--app``; UserError unless it declares ``attribute``
    (``example`` shows how, e.g. ``retention=RetentionPolicy(...)``)."""
    from framework.app import App

    app = load_spec(spec)
    if not isinstance(app, App):
        raise UserError(f"--app {spec}: not a converge App")
    if getattr(app, attribute) is None:
        raise UserError(f"--app {spec}: the app declares no {attribute} (App(..., {example}))")
    return app


def store_beside(store_url: str, name: str, flag: str, configured: str | None) -> str:
    """``configured`` (the setting) when set, else a SQLite file ``name`` beside a SQLite wide
    store; UserError naming ``flag`` when the store is not SQLite."""
    from stores.open import sqlite_beside

    if configured:
        return configured
    beside = sqlite_beside(store_url, name)
    if beside is None:
        raise UserError(f"{flag}: give a URL (the store is not SQLite, nothing to put it beside)")
    return beside


def checkpoints_url(store_url: str, configured: str | None) -> str:
    """The checkpoint store: ``configured`` (``--checkpoints``), else the ``checkpoints`` setting,
    else ``checkpoints.db`` beside a SQLite wide store (see ``store_beside``)."""
    return store_beside(
        store_url, "checkpoints.db", "--checkpoints", configured or env_setting("checkpoints")
    )


def locks_url(store_url: str, configured: str | None) -> str:
    """The job lock backend: ``configured`` (``--locks``), else the ``job_locks`` setting, else
    ``jobs.db`` beside a SQLite wide store (see ``store_beside``)."""
    return store_beside(store_url, "jobs.db", "--locks", configured or env_setting("job_locks"))


async def open_existing_store(url: str) -> Any:
    """Open the wide store; UserError when a SQLite store file does not exist (never create one)."""
    from stores.open import open_wide_store, sqlite_path

    if url.startswith("sqlite:") and not sqlite_path(url).exists():
        raise UserError(f"--wide-store: {sqlite_path(url)} does not exist")
    return await open_wide_store(url)
