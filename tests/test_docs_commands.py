"""The shell commands the docs show, for pytest: every fenced bash / sh / shell / console block of README.md,
CONTRIBUTING.md and docs/*.md (a console block: its ``$ `` lines) parses with ``bash -n`` once its ``<name>``
placeholders are plain words, and no line ends in a backslash that does not continue it (``\\\\``: a literal
backslash, the next line then runs alone; a backslash then spaces; a backslash before a blank line or the block's
end); the blocks right after a ``<!-- docs-test: run -->`` line run with ``bash -e`` from the checkout's root and
exit 0 (mark only cheap ones that need no server and write nothing: ``--help``); and every ``make ...`` names
targets and variables the Makefile has (a flag for a target goes in its variable, ``make demo
DEMO_ARGS=--no-quotas``), each such variable listed by ``make help``.
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SHELL_LANGUAGES = {"bash", "sh", "shell", "console"}
RUN_MARKER = "<!-- docs-test: run -->"
FENCE = re.compile(r"^(```+|~~~+)\s*([\w-]*)")
PLACEHOLDER = re.compile(r"<[A-Za-z][\w .-]*>")


@dataclass(frozen=True)
class Block:
    path: Path
    line: int  # of the opening fence, 1-based
    language: str
    text: str
    run: bool

    def where(self, line_in_block: int = 0) -> str:
        """``file:line`` of the fence, or of the block's ``line_in_block``-th line (1-based)."""
        shown = self.path.relative_to(ROOT) if self.path.is_relative_to(ROOT) else self.path
        return f"{shown}:{self.line + line_in_block}"

    def script(self) -> str:
        """The commands, line for line with the block: a console block's output lines (not ``$ `` lines nor their
        continuations) left blank, placeholders replaced."""
        lines = self.text.splitlines()
        if self.language == "console":
            commands, continuing = [], False
            for line in lines:
                command = continuing or line.startswith("$ ")
                commands.append((line if continuing else line.removeprefix("$ ")) if command else "")
                continuing = command and line.endswith("\\")
            lines = commands
        return "\n".join(PLACEHOLDER.sub("PLACEHOLDER", line) for line in lines) + "\n"


def doc_files() -> list[Path]:
    return [path for path in [ROOT / "README.md", ROOT / "CONTRIBUTING.md"] if path.exists()] + sorted(
        (ROOT / "docs").glob("*.md")
    )


def shell_blocks(path: Path, text: str | None = None) -> list[Block]:
    """Every fenced block of ``path`` in one of SHELL_LANGUAGES."""
    lines = (path.read_text() if text is None else text).splitlines()
    blocks, index = [], 0
    while index < len(lines):
        opening = FENCE.match(lines[index])
        if not opening:
            index += 1
            continue
        fence, language = opening.group(1), opening.group(2).lower()
        end = next((i for i in range(index + 1, len(lines)) if lines[i].startswith(fence)), len(lines))
        if language in SHELL_LANGUAGES:
            marked = index > 0 and lines[index - 1].strip() == RUN_MARKER
            blocks.append(Block(path, index + 1, language, "\n".join(lines[index + 1 : end]), marked))
        index = end + 1
    return blocks


def continuation_problems(block: Block) -> list[str]:
    """Lines whose trailing backslash does not continue the command as the reader expects."""
    problems = []
    lines = block.script().splitlines()
    for number, line in enumerate(lines):
        where = block.where(number + 1)
        trailing = len(line) - len(line.rstrip("\\"))
        if trailing >= 2 and trailing % 2 == 0:
            ending = "\\" * trailing
            problems.append(f"{where}: ends in {ending}: a literal backslash, the next line runs alone")
        elif re.search(r"\\[ \t]+$", line):
            problems.append(f"{where}: a backslash then spaces: it escapes a space, not the line's end")
        elif trailing % 2 == 1 and (number + 1 == len(lines) or not lines[number + 1].strip()):
            problems.append(f"{where}: continues into a blank line or the end of the block")
    return problems


def bash_syntax_error(block: Block) -> str | None:
    """bash's complaint with each ``line N`` turned into the doc's ``file:line``, or None."""
    checked = subprocess.run(["bash", "-n"], input=block.script(), capture_output=True, text=True)
    if checked.returncode == 0:
        return None
    return re.sub(r"bash: line (\d+)", lambda m: block.where(int(m.group(1))), checked.stderr.strip())


def all_blocks() -> list[Block]:
    return [block for path in doc_files() for block in shell_blocks(path)]


BLOCKS = all_blocks()


def test_the_docs_have_shell_blocks_and_some_are_run() -> None:
    assert len(BLOCKS) > 10, [block.where() for block in BLOCKS]
    assert any(block.run for block in BLOCKS), f"no block is marked {RUN_MARKER}"


@pytest.mark.parametrize("block", BLOCKS, ids=lambda block: block.where())
def test_each_shell_block_parses_and_continues_its_lines(block: Block) -> None:
    problems = continuation_problems(block)
    error = bash_syntax_error(block)
    assert not problems and not error, "\n".join([*problems, *([error] if error else [])]) + "\n" + block.text


@pytest.mark.parametrize("block", [block for block in BLOCKS if block.run], ids=lambda block: block.where())
def test_each_marked_block_runs(block: Block, tmp_path: Path) -> None:
    # `python` is this interpreter: a link in a directory put first on PATH.
    (tmp_path / "python").symlink_to(sys.executable)
    env = {**os.environ, "PATH": f"{tmp_path}{os.pathsep}{os.environ['PATH']}"}
    ran = subprocess.run(
        ["bash", "-e", "-c", block.script()], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120
    )
    assert ran.returncode == 0, f"{block.where()} exited {ran.returncode}:\n{block.text}\n{ran.stderr[-2000:]}"


def checked(text: str, language: str = "bash") -> tuple[list[str], str | None]:
    (block,) = shell_blocks(ROOT / "x.md", f"```{language}\n{text}\n```\n")
    return continuation_problems(block), bash_syntax_error(block)


def test_a_stray_double_backslash_is_caught_though_bash_parses_it() -> None:
    problems, error = checked("PYSPARK_PYTHON=/usr/bin/python3.11 \\\\\n  /usr/lib/spark/sbin/start-connect-server.sh")
    assert error is None  # bash -n alone accepts it: it runs a command named `\`, then the script without the variable
    assert len(problems) == 1 and "literal backslash" in problems[0]


@pytest.mark.parametrize(
    ("text", "found"),
    [
        ("ls \\ \n  -l", "escapes a space"),
        ("ls \\\n", "blank line or the end"),
        ("ls \\\n\n-l", "blank line or the end"),
    ],
)
def test_other_broken_continuations_are_caught(text: str, found: str) -> None:
    problems, _ = checked(text)
    assert len(problems) == 1 and found in problems[0], problems


def test_good_continuations_placeholders_and_console_output_pass() -> None:
    assert checked("aws s3 cp x s3://<BucketName>/a \\\n  --region <region>\nls") == ([], None)
    assert checked("$ python -m x --help \\\n    --y\nusage: x [-h] <not a command> |\n$ ls", "console") == ([], None)


def test_a_syntax_error_is_caught() -> None:
    _, error = checked('echo "unterminated')
    assert error and "x.md:2" in error


def test_only_a_marked_block_runs() -> None:
    blocks = shell_blocks(ROOT / "x.md", f"```bash\nls\n```\n\n{RUN_MARKER}\n```sh\nls\n```\n```python\nx\n```\n")
    assert [(block.language, block.run) for block in blocks] == [("bash", False), ("sh", True)]


MAKE_OPTIONS = {"-n", "-s", "-k", "-B"}  # make's own options the docs may show


def makefile_targets_and_variables() -> tuple[set[str], set[str]]:
    makefile = (ROOT / "Makefile").read_text()
    targets = set(re.findall(r"^([\w.-]+)\s*:(?!=)", makefile, re.MULTILINE))
    variables = set(re.findall(r"\$\((\w+)\)", makefile)) | set(re.findall(r"^(\w+)\s*\?=", makefile, re.MULTILINE))
    return targets, variables


def make_invocations(path: Path) -> list[tuple[str, str]]:
    """``(where, command)`` for each ``make ...`` of ``path``: in its shell blocks and its inline code."""
    found = []
    for block in shell_blocks(path):
        for number, line in enumerate(block.script().splitlines(), 1):
            command = line.split(" #")[0].strip()
            if command.startswith("make "):
                found.append((block.where(number), command))
    for number, line in enumerate(path.read_text().splitlines(), 1):
        found += [(f"{path.relative_to(ROOT)}:{number}", code) for code in re.findall(r"`(make [^`]+)`", line)]
    return found


def make_problems(command: str, targets: set[str], variables: set[str]) -> list[str]:
    problems = []
    for word in shlex.split(command)[1:]:
        name, assigns, _ = word.partition("=")
        if word.startswith("-"):
            if word not in MAKE_OPTIONS:
                problems.append(f"{word}: not an option of make (a flag for a target goes in its variable)")
        elif assigns:
            if name not in variables:
                problems.append(f"{name}=: the Makefile reads no such variable")
        elif word not in targets:
            problems.append(f"{word}: no such target in the Makefile")
    return problems


def test_every_make_command_in_the_docs_names_a_target_and_variables_the_makefile_has() -> None:
    targets, variables = makefile_targets_and_variables()
    found = [(where, command) for path in doc_files() for where, command in make_invocations(path)]
    assert len(found) > 20, found
    problems = [
        f"{where}: `{command}`: {p}" for where, command in found for p in make_problems(command, targets, variables)
    ]
    assert not problems, "\n".join(problems)


def test_a_flag_make_does_not_take_is_caught() -> None:
    targets, variables = makefile_targets_and_variables()
    assert make_problems("make demo --no-quotas", targets, variables)
    assert make_problems("make demo NO_SUCH_ARGS=x", targets, variables)
    assert make_problems("make no-such-target", targets, variables)
    assert not make_problems("make demo DEMO_ARGS=--no-quotas", targets, variables)
    assert {"DEMO_ARGS", "BENCH", "TEST_JOBS", "PYTEST_ARGS", "SERVERS_ARGS"} <= variables


def test_make_help_names_every_variable_that_passes_arguments_on() -> None:
    shown = subprocess.run(["make", "--no-print-directory", "help"], cwd=ROOT, capture_output=True, text=True)
    assert shown.returncode == 0, shown.stderr
    for variable in ("DEMO_ARGS", "BENCH", "TEST_JOBS", "PYTEST_ARGS", "SERVERS_ARGS", "hour-long soaks"):
        assert variable in shown.stdout
