"""The ``aflite`` command line: a thin layer over the library.

Each sub-command lives in its own module under :mod:`aflite.cli`, which declares it once (``COMMAND``:
:class:`aflite.rundir.commands.Command`; the table :data:`COMMANDS` is read from those declarations) and exposes
``register(subparsers)``: it declares its options (the shared ones come from :mod:`aflite.cli.flags`, so each
name means one thing in every command), and its handler parses them and calls the library. Modules are imported
cheaply (only argparse set-up runs at start) so ``aflite --help`` stays fast. ``main`` turns an
:class:`aflite.errors.AfliteError` into one line on stderr and exit code 2.
"""

from __future__ import annotations

import argparse
import contextlib
import errno
import importlib
import os
import re
import sys
from collections.abc import Callable, Iterator, Sequence
from types import ModuleType
from typing import Any, NoReturn

from aflite import __version__
from aflite.cli.flags import add_threads
from aflite.errors import AfliteError, ParameterError
from aflite.rundir.commands import declarations
from aflite.threads import prepare_process

# the built-in sub-commands in --help order, each declared once in its module's COMMAND (aflite.rundir.commands)
COMMANDS: tuple[str, ...] = tuple(declarations())
_NAME = re.compile(r"[a-z][a-z0-9-]*\Z")  # a command's name, as typed after `aflite`
_ADDED: dict[str, ModuleType] = {}  # commands added from outside aflite (add_command), after the built-in ones


def add_command(name: str, module: ModuleType) -> None:
    """Adds the sub-command ``name`` from a module of your own, laid out like each module under :mod:`aflite.cli`:
    ``register(subparsers)`` (adds the parser, sets ``handler``), ``LIBRARY`` (the library calls, as
    ``"module:attribute"`` or the objects, whose keywords its flags are) and optionally ``CLI_ONLY`` (flag -> why
    it is no keyword). The command's library function returns a :class:`aflite.rundir.results.Result`, which also
    gives its folder's page; nothing else in aflite is edited. A name that is no command name, that aflite or an
    earlier add_command has, or a ``register`` that adds any other sub-command is refused here, in one line, so
    that it never breaks ``aflite --help``."""
    if not isinstance(name, str) or not _NAME.match(name):
        raise ParameterError(f"add_command({name!r}): a command's name is lowercase letters, digits and '-', "
                             f"starting with a letter")
    if not callable(getattr(module, "register", None)) or not isinstance(getattr(module, "LIBRARY", None), tuple):
        raise ParameterError(f"add_command({name!r}): the module needs register(subparsers) and a LIBRARY tuple")
    if name in COMMANDS or name in _ADDED:
        raise ParameterError(f"add_command({name!r}): aflite has a command of that name")
    problem = _registers_only(name, module)
    if problem:
        raise ParameterError(f"add_command({name!r}): {problem}")
    _ADDED[name] = module


def _registers_only(name: str, module: ModuleType) -> str | None:
    """Why ``module.register`` does not add exactly the sub-command ``name`` (tried on a scratch parser), or None."""
    scratch = argparse.ArgumentParser(prog="aflite", add_help=False).add_subparsers()
    try:
        module.register(scratch)
    except Exception as exc:  # a plug-in's own failure, reported as one line, not raised from every aflite call
        return f"its register(subparsers) failed: {type(exc).__name__}: {exc}"
    added = list(scratch.choices)  # names and aliases
    if added == [name]:
        return None
    own = [n for n in added if n in COMMANDS]
    why = f" ({', '.join(own)}: aflite's own)" if own else ""
    return f"its register(subparsers) adds {', '.join(map(repr, added)) or 'nothing'}{why}, not only {name!r}"


def command_modules() -> dict[str, ModuleType]:
    """Every sub-command's module, in --help order: aflite's own, then those added with :func:`add_command`."""
    own = {name: importlib.import_module(command.cli) for name, command in declarations().items()}
    return {**own, **_ADDED}


class _Parser(argparse.ArgumentParser):
    """argparse with one-line errors (the usage text is one ``--help`` away)."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="aflite",
        description="Find, measure and remove dataset artifacts (AFLite, Le Bras et al. 2020).",
    )
    parser.add_argument("--version", action="version", version=f"aflite {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for name, module in command_modules().items():
        problem = _registers_only(name, module) if name in _ADDED else None
        if problem:  # changed since add_command checked it: left out, every other command still works
            print(f"aflite: warning: the added command {name!r} is left out: {problem}", file=sys.stderr)
            continue
        module.register(sub)

    for command_parser in sub.choices.values():  # one thread policy for every command (aflite.threads)
        if "--threads" not in command_parser._option_string_actions:
            add_threads(command_parser)
    return parser


def _claim_output(args: argparse.Namespace) -> contextlib.AbstractContextManager[Any]:
    """Claim --out (checked, marked, locked) before the command computes anything, as the
    :class:`~aflite.rundir.folder.RunFolder` the command's library function writes once, with the argv parsed here
    (results.json records it); None for a command without an output folder."""
    kind = getattr(args, "output", None)
    out = getattr(args, "out", None)
    if kind != "folder" or out is None:
        return contextlib.nullcontext(None)
    from aflite.rundir.folder import RunFolder

    return RunFolder.claim(out, args.command, overwrite=getattr(args, "overwrite", False),
                           resume=getattr(args, "resume", False), argv=args.argv)


def _check_before_claim(args: argparse.Namespace) -> None:
    """What the command would refuse later that needs neither the data nor the folder (the device, with the
    cluster it runs beside; a --cache-dir it cannot or must not write), refused before --out is claimed: a refusal
    leaves the folder as it was."""
    if getattr(args, "output", None) != "folder":
        return
    cache = getattr(args, "cache_dir", None)
    if cache is not None:  # a file, read-only, inside another run folder: refused before --out is touched
        from aflite.rundir.lock import check_cache_dir

        check_cache_dir(cache, getattr(args, "out", None))
    device = getattr(args, "device", None)
    if not isinstance(device, str):
        return
    from aflite.device import ensemble_device

    ensemble_device(device, getattr(args, "cluster", None))


@contextlib.contextmanager
def _library_warnings() -> Iterator[None]:
    """Warnings of scikit-learn (and numpy, scipy) during a command: the library lists them in OUT/results.json
    under ``"warnings"`` (:func:`aflite.rundir.results.recording_warnings`); here they are summed up in one stderr line
    instead of each printed raw. Other warnings pass through."""
    from aflite.rundir.results import recording_warnings

    with recording_warnings(summarize=False) as record:
        try:
            yield
        finally:
            counts = record.counts()
            if counts:
                where = f"; listed in {record.written[-1]} under \"warnings\"" if record.written else ""
                print(f"note: {sum(counts.values())} warning(s) from scikit-learn/numpy/scipy, e.g. "
                      f"{next(iter(counts))[:160]}{where}", file=sys.stderr)


@contextlib.contextmanager
def _scratch() -> Iterator[None]:
    """A private temporary folder for the command, removed when it ends: the libraries it loads leave scratch
    behind in $TMPDIR otherwise (PyTorch's ``torchinductor_<user>``, ONNX Runtime's ``.ses``, Dask's
    ``dask-scratch-space`` and its workers' folders). $TMPDIR (inherited by Dask's worker processes) and Python's
    ``tempfile`` point into it while the command runs."""
    import shutil
    import tempfile

    try:
        private = tempfile.mkdtemp(prefix=f"aflite-{os.getpid()}-")
    except OSError:  # no writable temporary folder: the libraries will say so if they need one
        yield
        return
    old_env, old_dir = os.environ.get("TMPDIR"), tempfile.tempdir
    os.environ["TMPDIR"], tempfile.tempdir = private, private
    try:
        yield
    finally:
        tempfile.tempdir = old_dir
        if old_env is None:
            os.environ.pop("TMPDIR", None)
        else:
            os.environ["TMPDIR"] = old_env
        shutil.rmtree(private, ignore_errors=True)


class _PipeSafe:
    """``sys.stdout`` for the length of a command: once the reader has gone (``aflite run ... | head -3``), what
    is still printed is dropped instead of raising BrokenPipeError half-way through the run, so the run finishes
    and its files are written. File descriptor 1 is pointed at /dev/null then, so the interpreter's last flush is
    quiet too."""

    def __init__(self, stream: Any) -> None:
        self._stream, self.gone = stream, False

    def _guard(self, fn: Callable[[], Any]) -> Any:
        if self.gone:
            return None
        try:
            return fn()
        except BrokenPipeError:
            self.gone = True
            with contextlib.suppress(OSError, ValueError):
                devnull = os.open(os.devnull, os.O_WRONLY)
                os.dup2(devnull, self._stream.fileno())
                os.close(devnull)
            return None

    def write(self, text: str) -> int:
        self._guard(lambda: self._stream.write(text))
        return len(text)

    def flush(self) -> None:
        self._guard(self._stream.flush)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)


@contextlib.contextmanager
def _stdout_pipe_safe() -> Iterator[None]:
    old = sys.stdout
    sys.stdout = _PipeSafe(old)
    try:
        yield
    finally:
        sys.stdout.flush()  # the guard's own flush: a reader gone by now is dropped there
        sys.stdout = old


def main(argv: Sequence[str] | None = None) -> int:
    prepare_process()  # before build_parser loads numpy and scikit-learn (aflite.threads)
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # --help, --version or a usage error (already reported on one line)
        return int(exc.code or 0) if not isinstance(exc.code, str) else 2
    args.argv = list(argv) if argv is not None else sys.argv[1:]  # recorded in OUT/results.json
    from aflite.data import option_names

    token = option_names(True)  # error messages name --text-a, --label, ... rather than keywords
    try:
        validate = getattr(args, "validate", None)
        if validate is not None:  # checks that need neither data nor the output folder
            validate(args)
        from aflite.threads import thread_policy

        if getattr(args, "quiet", False):  # no progress bars from the libraries either (model loading)
            os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
        _check_before_claim(args)
        with _stdout_pipe_safe(), _scratch(), thread_policy(getattr(args, "threads", None)), \
                _claim_output(args) as folder, _library_warnings():
            args.out_folder = folder
            code = args.handler(args)
    except AfliteError as exc:
        print(f"aflite {args.command}: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"aflite {args.command}: interrupted", file=sys.stderr)
        return 130
    except OSError as exc:  # a full disk met by a write outside aflite.atomic (a model file, a library's own)
        from aflite.atomic import short_write

        short = short_write(exc)
        if exc.errno not in (errno.ENOSPC, errno.EDQUOT, errno.EFBIG, errno.EROFS) and short is None:
            raise
        where = f" {exc.filename}" if exc.filename else ""
        print(f"aflite {args.command}: error: cannot write{where}: {short or exc.strerror or exc}; free some space "
              f"(files written so far are complete) and run again", file=sys.stderr)
        return 2
    finally:
        token.var.reset(token)
    return int(code or 0)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
