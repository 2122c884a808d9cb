"""What every command line of the project shares: a mistake is one line on stderr and exit code 2.

Who uses it: ``python -m pyspark_aws_kinesis consumers`` (``pyspark_aws_kinesis.__main__``), the load generator
(``kinesis_generator.cli``), the sample jobs and the demo (``spark_app.common``, ``spark_app.demo``), the
submitters (``infra.submit_step``, ``infra.submit_serverless``) and the CDK app's context check (``infra.config``).
Their parsers are ``OneLineParser``s: no usage block, no traceback, but ``error: --flag: what is wrong; allowed:
what is (<prog> --help lists the flags)``. ``number`` and ``endpoint_url`` read values so that what is refused is
said the same way everywhere; ``did_you_mean`` names the closest known words. Only the standard library is
imported at module level: any layer of the connector, and any of the project's command lines, may import it.
"""

from __future__ import annotations

import argparse
import difflib
import math
import re
import sys
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import NoReturn

EXIT_USAGE = 2  # argparse's own code for a bad command line
# argparse's "argument --rate: ..." / "argument -r/--rate: ..." / "argument ACTION: ..."
_ARGUMENT = re.compile(r"^argument ([^:]+): ")


def one_line(text: str) -> str:
    """``text`` on one line, whatever line breaks (or AWS's text) it held."""
    return " ".join(str(text).split())


def usage_line(message: str, prog: str) -> str:
    """An argparse error (or our own) as the one line to print: ``argument --rate: x`` reads ``--rate: x``, and
    it ends with where every flag is listed."""
    match = _ARGUMENT.match(message)
    if match:
        names = match.group(1).split("/")
        name = next((n for n in names if n.startswith("--")), names[0])
        message = f"{name}: {message[match.end() :]}"
    return f"{one_line(message)} ({prog} --help lists the flags)"


class OneLineParser(argparse.ArgumentParser):
    """argparse whose every mistake is one line on stderr (``error: ...``) and exit code 2, without the usage
    block. Sub-commands (``add_subparsers``) are parsers of the same class. Override ``error`` to raise instead
    (the generator does, for its ``--json`` error object), with ``usage_line`` for the text."""

    def error(self, message: str) -> NoReturn:
        self.exit(EXIT_USAGE, f"error: {self.usage_line(message)}\n")

    def usage_line(self, message: str) -> str:
        return usage_line(message, self.prog)


def program(module: str, script: str | None = None) -> str:
    """How the user ran the command, for ``usage:`` and error lines: the console script's name when that is what
    ran (``kinesis-generator``, from ``sys.argv[0]``), else ``python -m <module>``."""
    ran = Path(sys.argv[0] or "").name
    if script and Path(ran).stem == script:
        return ran
    return f"python -m {module}"


def _shown(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else f"{value:g}"


def number(
    minimum: float = 0,
    *,
    inclusive: bool = False,
    maximum: float | None = None,
    whole: bool = False,
    unit: str = "",
) -> Callable[[str], float | int]:
    """An argparse ``type``: a finite number (``whole``: an integer, written without a point or an exponent) above
    ``minimum`` (or at least it, ``inclusive``) and at most ``maximum``. What it refuses (``inf``, ``nan``, ``1e3``
    for a whole number, ``-3``) is told as ``got '-3'; allowed: a number of seconds > 0``."""
    kind = ("a whole number" if whole else "a number") + (f" of {unit}" if unit else "")
    if maximum is not None and inclusive:
        allowed = f"{kind} from {_shown(minimum)} to {_shown(maximum)}"
    else:
        allowed = f"{kind} {'>=' if inclusive else '>'} {_shown(minimum)}"
        allowed += f" and <= {_shown(maximum)}" if maximum is not None else ""

    def parse(text: str) -> float | int:
        try:
            value: float | int = int(text) if whole else float(text)
        except ValueError:
            value = math.nan
        low_ok = value >= minimum if inclusive else value > minimum
        if not (math.isfinite(value) and low_ok and (maximum is None or value <= maximum)):
            raise argparse.ArgumentTypeError(f"got {text!r}; allowed: {allowed}")
        return value

    parse.__name__ = "whole number" if whole else "number"
    return parse


ENDPOINT_EXAMPLE = "an http(s) URL such as https://kinesis.eu-west-1.amazonaws.com or http://127.0.0.1:4567"


def endpoint_url(text: str) -> str:
    """An argparse ``type`` for ``--endpoint-url``: ``http(s)://host[:port][/path]`` with no user info (the
    connector's own rule for ``kinesis.endpointUrl``). A value that holds user info is not echoed."""
    from .options.kinds import ENDPOINT, HiddenValueError  # the options registry loads only when a URL is given

    try:
        return ENDPOINT.parse(text)
    except HiddenValueError:
        raise argparse.ArgumentTypeError(
            f"got a URL with user info (not shown); allowed: {ENDPOINT_EXAMPLE}, without user:password@"
        ) from None
    except ValueError:
        raise argparse.ArgumentTypeError(f"got {text!r}; allowed: {ENDPOINT_EXAMPLE}") from None


def did_you_mean(word: str, known: Iterable[str], *, n: int = 2, cutoff: float = 0.6) -> str:
    """``did you mean 'a' or 'b'?`` for the known words closest to ``word`` (difflib's ratio >= ``cutoff``); ""
    when none is close."""
    close = difflib.get_close_matches(word, sorted(known), n=n, cutoff=cutoff)
    return f"did you mean {' or '.join(map(repr, close))}?" if close else ""
