"""One base for the connector's errors: every exception class in the package derives from KinesisConnectorError
and keeps its standard base, so ``except KinesisConnectorError`` and ``except ValueError`` both still catch it
(docs/errors.md)."""

from __future__ import annotations

import ast
import builtins
import importlib
import inspect
import pkgutil
from pathlib import Path

import pytest

import pyspark_aws_kinesis
from pyspark_aws_kinesis import KinesisConnectorError
from pyspark_aws_kinesis.options import OptionError, Side, parse_options
from pyspark_aws_kinesis.retry import RetriesExhaustedError

PACKAGE = pyspark_aws_kinesis.__name__


# Exceptions that never reach a user, by class name (names are unique in the package; modules move). Each needs
# its reason.
INTERNAL = {
    # options.kinds: raised only by an option kind's parse function to say "this value may hold a secret";
    # Option.parse catches it (as the ValueError it is) and raises an OptionError that does not echo the value.
    "HiddenValueError",
    # __main__: the CLI's one line and exit code (python -m pyspark_aws_kinesis); main() catches and prints it, so
    # a CLI user gets the line and the exit code, and no Python caller sees it.
    "CliError",
}


def _raise(name: str) -> None:
    raise ImportError(f"cannot import {name}")


def exception_classes() -> dict[str, type[BaseException]]:
    """Every exception class defined in a module of the package, as "<module below the package>:<qualname>"."""
    found: dict[str, type[BaseException]] = {}
    for info in pkgutil.walk_packages(pyspark_aws_kinesis.__path__, f"{PACKAGE}.", onerror=_raise):
        module = importlib.import_module(info.name)
        for cls in vars(module).values():
            if inspect.isclass(cls) and issubclass(cls, BaseException) and cls.__module__ == module.__name__:
                found[f"{info.name.removeprefix(PACKAGE + '.')}:{cls.__qualname__}"] = cls
    return found


CLASSES = exception_classes()


def test_the_walk_finds_the_connectors_errors() -> None:
    names = {key.split(":")[1] for key in CLASSES}
    assert {"OptionError", "DataLossError", "RetriesExhaustedError", "KinesisConnectorError"} <= names
    assert len(CLASSES) > 25, sorted(CLASSES)


@pytest.mark.parametrize("key", sorted(CLASSES))
def test_every_error_derives_from_the_base(key: str) -> None:
    cls = CLASSES[key]
    if cls.__name__ in INTERNAL:
        pytest.skip("allow-listed (INTERNAL)")
    assert issubclass(cls, KinesisConnectorError), f"{key}: add KinesisConnectorError as its first base"
    if KinesisConnectorError in cls.__bases__ and len(cls.__bases__) > 1:
        # (KinesisConnectorError, <standard base>): `except ValueError` and the like keep catching it.
        assert len(cls.__bases__) == 2 and cls.__bases__[0] is KinesisConnectorError, f"{key}: {cls.__bases__}"
        standard = cls.__bases__[1]
        assert getattr(builtins, standard.__name__, None) is standard, f"{key}: {standard} is not a built-in"


def test_the_allow_lists_name_classes_that_still_need_them() -> None:
    names = {cls.__name__: cls for cls in CLASSES.values()}
    assert len(names) == len(CLASSES), "two exception classes share a name: key the allow-lists by module too"
    listed = INTERNAL
    assert listed <= set(names), f"gone or renamed: {sorted(listed - set(names))}"


@pytest.mark.parametrize("key", sorted(CLASSES))
def test_each_error_is_made_with_a_message_and_caught_by_both_bases(key: str) -> None:
    cls = CLASSES[key]
    if not issubclass(cls, KinesisConnectorError) or any(
        "__init__" in vars(c) for c in cls.__mro__ if c.__module__.startswith(PACKAGE)
    ):
        pytest.skip("internal, or its own __init__ (tested on its own)")
    error = cls("what went wrong")
    assert str(error) == "what went wrong"
    for base in cls.__mro__[1:-1]:  # up to BaseException (object is last)
        with pytest.raises(base):
            raise error


def test_an_error_with_its_own_init_keeps_its_fields() -> None:
    error = RetriesExhaustedError("ListShards of stream 's'", 3, ConnectionResetError("reset"))
    assert isinstance(error, KinesisConnectorError) and isinstance(error, RuntimeError)
    assert error.attempts == 3 and "failed after 3 attempts" in str(error)


def test_an_option_error_is_caught_as_the_base_and_as_value_error() -> None:
    bad = {"kinesis.streamName": "s", "kinesis.maxFetchRecordsPerShard": "0"}
    with pytest.raises(KinesisConnectorError) as caught:
        parse_options(bad, Side.SOURCE)
    assert isinstance(caught.value, OptionError) and "kinesis.maxFetchRecordsPerShard" in str(caught.value)
    with pytest.raises(ValueError, match=r"kinesis\.maxFetchRecordsPerShard"):
        parse_options(bad, Side.SOURCE)


def test_the_base_is_exported_at_the_top() -> None:
    assert "KinesisConnectorError" in pyspark_aws_kinesis.__all__
    assert pyspark_aws_kinesis.errors.KinesisConnectorError is KinesisConnectorError
    assert KinesisConnectorError.__bases__ == (Exception,)


def test_errors_module_imports_nothing_of_the_connector() -> None:
    source = Path(pyspark_aws_kinesis.errors.__file__).read_text()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ImportFrom):
            assert node.level == 0 and node.module == "__future__", ast.unparse(node)
        assert not isinstance(node, ast.Import), ast.unparse(node)
