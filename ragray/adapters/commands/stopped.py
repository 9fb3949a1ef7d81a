"""How a command that stopped early says so: Ctrl-C and SIGTERM (exit 130), and a result it could
not write (a full disk, a quota: exit 1), each with the command that resumes it when it can be
resumed. Finished work stays on disk either way (:mod:`ragray.store.progress`)."""

from __future__ import annotations

import argparse
import errno
import shlex
import sys
from collections.abc import Sequence
from pathlib import Path

from ragray.errors import WriteError

__all__ = ["Terminated", "interrupted", "on_sigterm", "resume_command", "write_failed"]

#: errors of the disk itself, wherever they come from (a result, a cache beside it)
_FULL = (errno.ENOSPC, errno.EDQUOT)


class Terminated(KeyboardInterrupt):
    """SIGTERM (``kill``, a scheduler's stop), handled like Ctrl-C: finished work is on disk, and the
    run history records the run ``interrupted``."""


def on_sigterm(signum: int, frame: object) -> None:
    raise Terminated()


def resume_command(command: str, argv: Sequence[str], out: str) -> str:
    """The command line that continues an interrupted run: the same arguments, ``--out`` the
    run directory it was writing, ``--resume``."""
    words, skip = [], False
    for word in argv:
        if skip:
            skip = False
        elif word == "--out":
            skip = True
        elif not word.startswith("--out=") and word != "--resume":
            words.append(word)
    return shlex.join(["ragray", *words, "--out", out, "--resume"])


def _kept(command: str, out: str) -> str:
    return f"every finished {'trial' if command == 'sweep' else 'question'} is kept in {out}"


def interrupted(args: argparse.Namespace, argv: Sequence[str], exc: KeyboardInterrupt) -> int:
    """Ctrl-C or SIGTERM: say so and, for a resumable command (``args.resume_dir``), how to resume."""
    how = "terminated (SIGTERM)" if isinstance(exc, Terminated) else "interrupted"
    out = getattr(args, "resume_dir", None)
    if out is None:
        print(f"ragray {args.command}: {how}", file=sys.stderr)
        return 130
    print(f"ragray {args.command}: {how}; {_kept(args.command, out)}. Resume with:\n  "
          f"{resume_command(args.command, argv, out)}", file=sys.stderr)
    return 130


def write_failed(args: argparse.Namespace, argv: Sequence[str], exc: OSError) -> int | None:
    """ONE line for a result that could not be written (a :class:`WriteError`, a full disk or quota
    anywhere, or any ``OSError`` on a file under the run directory): the file, the reason and, for a
    resumable command, how to resume; exit status 1. None for another ``OSError`` (a bug: its
    traceback is wanted)."""
    out = getattr(args, "resume_dir", None)
    where = exc.filename if isinstance(exc.filename, str) else None
    if isinstance(exc, WriteError):
        what = str(exc)
    elif exc.errno in _FULL:
        what = f"cannot write {where or out or 'a file'}: {exc.strerror or exc}"
    elif where is not None and out is not None and Path(where).resolve().is_relative_to(Path(out).resolve()):
        what = f"{where}: {exc.strerror or exc}"
    else:
        return None
    line = f"ragray {args.command}: error: {what}"
    if out is not None:
        line += f"; {_kept(args.command, out)}; once it can be written, resume with: " + resume_command(
            args.command, argv, out)
    print(line, file=sys.stderr)
    return 1
