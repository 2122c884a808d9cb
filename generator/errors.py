"""The generator's exit codes, and the one-line errors that a user's mistake or an unusable stream end a run with.

Who uses it: ``kinesis_generator.checks`` raises these errors before anything is sent (and turns AWS's answers into
them during a run), ``kinesis_generator.sender.run`` raises them to its caller, ``kinesis_generator.cli`` prints the
line (or a JSON error object with ``--json``) and exits with the error's code. docs/generator.md lists the codes.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from kinesis_generator.stats import Summary

EXIT_OK = 0  # every record due was stored
EXIT_USAGE = 2  # a flag or its value is wrong (argparse's own code for a bad command line); nothing was sent
EXIT_TARGET = 3  # the stream cannot be written: credentials, endpoint, stream, permissions
EXIT_LOST = 4  # records were given up on: refused through the whole retry budget (``failed``)
EXIT_SHORT = 5  # the run ended (--duration) before every record due was stored; none was given up on
EXIT_INTERRUPTED = 130  # Ctrl-C (128 + SIGINT, as shells report it)


class GeneratorError(Exception):
    """A run that cannot start or go on, told in one line that names the flag or value and what to do.

    ``flag`` is the command-line flag at fault (``--stream``, ``--profile``; None when no flag is), ``exit_code``
    the CLI's exit code, ``summary`` what the run did before the error (None when nothing was sent).
    """

    exit_code = 1

    def __init__(self, message: str, flag: str | None = None):
        super().__init__(message)
        self.message = message
        self.flag = flag
        self.summary: Summary | None = None

    def after(self, summary: Summary) -> GeneratorError:
        """This error as the end of a run that had started: with its summary and the records it stored."""
        self.summary = summary
        self.message = f"{self.message} ({summary.records} records were stored before)"
        self.args = (self.message,)
        return self

    def as_dict(self) -> dict[str, object]:
        """The JSON error object ``--json`` prints (with the summary when records were sent)."""
        error: dict[str, object] = {"exit_code": self.exit_code, "flag": self.flag, "message": self.message}
        found: dict[str, object] = {"error": error}
        if self.summary is not None:
            found["summary"] = self.summary.as_dict()
        return found


class UsageError(GeneratorError, ValueError):
    """A flag or its value is wrong (a file that is not there, an unknown profile or region, a duration that is
    not positive); found before anything is sent. A ValueError too, as ``kinesis_generator.run`` always raised for bad
    input (a template that does not compile raises ``kinesis_generator.TemplateError``, also a ValueError)."""

    exit_code = EXIT_USAGE


class TargetError(GeneratorError):
    """The stream cannot be written: no or invalid credentials, an endpoint that does not answer, a stream that
    does not exist or is not active, missing permissions."""

    exit_code = EXIT_TARGET
