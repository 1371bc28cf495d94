"""The shell commands and YAML snippets of README.md and docs/, found and checked without running them.

A fenced block tagged bash (or sh, shell, console), an untagged block's `$ ` lines, and an inline code span that
starts like a command (`python -m tracevote ...`, `dvc ...`, `make ...`) are commands. Each is checked for what
can go stale:

    make demo DEMO_DATASET=x          -> the target exists; the Makefile reads DEMO_DATASET
    python -m tracevote grade --limit 5 -> the project's own argument parser accepts it
    dvc exp run -S eval.repeat=8 report -> DVC's parser accepts it; `report` is a stage of dvc.yaml;
                                           eval.repeat=8 passes check_params on the committed params.yaml
    vllm serve ...                    -> another program: named in OTHER_PROGRAMS, with why it is not checked

A YAML block is a fragment of params.yaml: merged onto the committed params.yaml after the page's earlier
fragments, the result must pass check_params (`<!-- docs-check: not params -->` before it marks YAML that is not
params.yaml's). A block preceded by `<!-- docs-check: run -->` is also run as written, in a scratch project on the
simulator from a shell without the venv on PATH (`run activated`: with it), by tests/test_docs_commands.py.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import logging
import re
import shlex
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from dvc.cli import DvcParserError
from dvc.cli.parser import get_main_parser
from markdown_it import MarkdownIt

from tests.conftest import REPO_ROOT, hang_guard_s
from tracevote.cli.demo import deep_merge
from tracevote.cli.main import build_parser
from tracevote.core.config import load_params
from tracevote.core.errors import ConfigError

DOC_FILES = (REPO_ROOT / "README.md", *sorted((REPO_ROOT / "docs").rglob("*.md")))
SHELL_LANGS = {"bash", "sh", "shell", "console"}
MARKER = re.compile(r"<!--\s*docs-check:\s*(.+?)\s*-->")
# An inline code span is a command when it starts with one of these words.
COMMAND_STARTS = re.compile(r"(\.venv/bin/)?(python3? -m tracevote|tracevote|dvc|make)( |$)")
# Programs the docs name that are not ours, DVC's or make's: their flags are theirs to keep.
OTHER_PROGRAMS = {
    "vllm": "a GPU server (vLLM's own CLI)",
    "cat": "prints a file", "head": "prints a file's first lines",
    "export": "a shell builtin", "source": "a shell builtin", "cd": "a shell builtin",
}
# Modules run with `python -m` that are not ours: their flags are theirs to keep.
OTHER_MODULES = {"pip": "the package installer", "llama_cpp.server": "llama-cpp-python's server",
                 "bench.stress_grade": "the grade stress run (its options run at two runs in tests/test_bench.py)",
                 "bench.bench_online_live": "the live online benchmark (its quick scale runs in tests/test_bench.py)",
                 "bench.plan_calibration": "the planner's calibration cases (a small scale runs in "
                                           "tests/deepconf/test_plan_calibration.py)",
                 "bench.split_stream_cpu": "client CPU per streamed token with a reasoning parser's split and "
                                           "without (a minute; not run by the suite)",
                 "bench.stream_cpu_before_after": "client CPU per streamed token before and after a change of the "
                                                  "streaming client (minutes; not run by the suite)",
                 "bench.signals_cost": "the score stage's time per token signal and a pool's bytes per token per "
                                       "kept top-k (a minute; not run by the suite)",
                 "bench.top_tokens_cost": "what pool.keep_top_tokens costs in bytes per token (seconds; its function "
                                          "runs in tests/sampling/test_keep_top_tokens.py)",
                 "bench.explorer_trace_size": "the explorer's trace files' bytes per token and CPU (seconds; not run "
                                              "by the suite)",
                 "bench.explorer_trace_open": "a trace page of a paper-scale chunk opened in headless Chromium (a "
                                              "minute; its project builder runs small in tests/explorer/)",
                 "bench.real_measures": "the real pool's token signals, recomputed without tracevote (needs a "
                                        "`make real` pool; its functions run in tests/test_bench_real_measures.py)"}
# Commands that run the command after them: `nice -n 15 python x.py` is checked as `python x.py`.
WRAPPERS = {"nice": {"-n"}, "time": set(), "env": set()}
PLACEHOLDER_SETTINGS = {"key=value", "…", "..."}  # prose describing -S itself
SHELL_WORDS = {"for", "do", "done", "while", "if", "then", "else", "fi", "{", "}"}
ASSIGNMENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*=")


@dataclass(frozen=True)
class Snippet:
    path: Path
    line: int  # 1-based, of the fence or the paragraph
    lang: str  # "bash", "yaml", ... ("inline" for a code span)
    text: str
    marker: str | None  # what a `<!-- docs-check: ... -->` just before it says

    @property
    def where(self) -> str:
        shown = self.path.relative_to(REPO_ROOT) if self.path.is_relative_to(REPO_ROOT) else self.path
        return f"{shown}:{self.line}"


def snippets(path: Path) -> list[Snippet]:
    """Every fenced block and inline code span of a Markdown file, in order."""
    tokens = MarkdownIt("commonmark").parse(path.read_text(encoding="utf-8"))
    found, marker = [], None
    for token in tokens:
        line = (token.map[0] + 1) if token.map else 0
        if token.type == "html_block" and (match := MARKER.search(token.content)):
            marker = match.group(1)
            continue
        if token.type == "fence":
            found.append(Snippet(path, line, token.info.strip().split(" ")[0], token.content, marker))
        elif token.type == "inline":
            found += [Snippet(path, line, "inline", child.content, None)
                      for child in token.children or [] if child.type == "code_inline"]
        marker = None  # a marker speaks of the block right after it only
    return found


def every_snippet() -> list[Snippet]:
    return [snippet for path in DOC_FILES for snippet in snippets(path)]


def shell_text(snippet: Snippet) -> str | None:
    """The shell commands of a snippet, as a script, or None when it holds none."""
    if snippet.lang in SHELL_LANGS:
        return snippet.text
    if snippet.lang == "":  # a transcript: its `$ ` lines are the commands
        commands = [line[2:] for line in snippet.text.splitlines() if line.startswith("$ ")]
        return "\n".join(commands) + "\n" if commands else None
    if snippet.lang == "inline" and COMMAND_STARTS.match(snippet.text):
        # prose elides, names alternatives and placeholders: `dvc …` is checked as `dvc`, `show|diff` as `show`,
        # `<method>` as `_method`
        text = re.split(r"\s(?:\.\.\.|…)(?:\s|$)", snippet.text)[0]  # `dvc …`: the rest left out
        text = re.sub(r"(?<=\S)\|\S*", "", text)
        return re.sub(r"<([^<>]+)>", lambda match: "_" + re.sub(r"\W", "_", match.group(1)), text)
    return None


def simple_commands(script: str) -> list[list[str]]:
    """The words of each simple command: `a | b && FOO=1 c > f # x` -> [["a"], ["b"], ["c"]]. Shell keywords,
    leading assignments, redirections and the brackets of optional parts (`[--out FILE]`) are left out."""
    commands = []
    for line in re.sub(r"\$\(\([^)]*\)\)", "0", script.replace("\\\n", " ")).splitlines():  # $((1 + 2)): a word
        lexer = shlex.shlex(line, posix=True, punctuation_chars=True)
        lexer.whitespace_split, lexer.commenters = True, "#"
        words: list[str] = []
        redirect = False
        for token in lexer:
            if token and set(token) <= set("();<>|&"):
                redirect = token in (">", ">>", "<")
                if not redirect:
                    commands.append(words)
                    words = []
                continue
            if redirect:
                redirect = False
                continue
            words.append(token)
        commands.append(words)
    return [_program_words(words) for words in commands if _program_words(words)]


def _program_words(words: list[str]) -> list[str]:
    while words and (words[0] in SHELL_WORDS or ASSIGNMENT.match(words[0])):
        if words[0] in ("for", "while", "if"):
            return []
        words = words[1:]
    return [unbracketed for word in words if (unbracketed := _unbracketed(word))]


def _unbracketed(word: str) -> str:
    """A word without the brackets of an optional part: "[--out" -> "--out", "FILE]" -> "FILE", "[METHOD=M]" ->
    "METHOD=M"; a value's own brackets stay: "eval.k=[1,4]" (a -S list)."""
    key, equals, value = word.partition("=")
    if equals and "[" not in key and value.startswith("[") and value.count("[") == value.count("]"):
        return word
    return word.strip("[]")


def bash_syntax_problem(script: str) -> str | None:
    result = subprocess.run(["bash", "-n"], input=script, capture_output=True, text=True, timeout=hang_guard_s())
    return result.stderr.strip() or None if result.returncode else None


class Checker:
    """Checks commands against this repository: its Makefile, its argument parser, dvc.yaml's stages (as DVC
    resolves them with `params_text`, the committed params.yaml) and check_params."""

    def __init__(self, params_text: str, work: Path) -> None:
        self.params = yaml.safe_load(params_text)
        self.work = work
        self.stages = dvc_stages(params_text, work / "project")
        # and every group dvc.yaml defines: a matrix over an empty list (deepconf.endpoints) has no stage yet
        self.groups = ({stage.split("@")[0] for stage in self.stages}
                       | set(yaml.safe_load((REPO_ROOT / "dvc.yaml").read_text(encoding="utf-8"))["stages"]))
        self.tracevote_parser, self.dvc_parser = build_parser(), get_main_parser()
        makefile = (REPO_ROOT / "Makefile").read_text(encoding="utf-8")
        self.targets = set(re.findall(r"^([A-Za-z][\w-]*):(?!=)", makefile, re.MULTILINE))
        self.make_variables = set(re.findall(r"\$\(([A-Z_]+)\)", makefile))

    def problems(self, script: str, *, whole: bool = True) -> list[str]:
        """`whole`: each command is complete (a block, checked by `bash -n`); prose may name one without its
        required arguments (an inline span, only split into words: a bash per span would cost seconds)."""
        syntax = bash_syntax_problem(script) if whole else None
        if syntax:
            return [f"not valid shell: {syntax}"]
        try:
            commands = simple_commands(script)
        except ValueError as exc:  # shlex: an unclosed quote
            return [f"not valid shell: {exc}"]
        problems = [problem for words in commands for problem in self.command(words)]
        return problems if whole else [problem for problem in problems if not _placeholder_problem(problem)]

    def command(self, words: list[str]) -> list[str]:
        words = _unwrapped(words)
        program = words[0].removeprefix(".venv/bin/")
        if program in ("python", "python3") and words[1:3] == ["-m", "tracevote"]:
            return self.tracevote(words[3:])
        if program in ("python", "python3"):
            return self.python(words[1:])
        if program == "tracevote":
            return self.tracevote(words[1:])
        if program == "dvc":
            return self.dvc(words[1:])
        if program == "make":
            return self.make(words[1:])
        if program in OTHER_PROGRAMS:
            return []
        return [f"{words[0]}: not a command the checker knows (add it to tests/docsnippets.py: OTHER_PROGRAMS, "
                f"saying why its flags are not checked)"]

    def python(self, argv: list[str]) -> list[str]:
        """`python -m <module>` (named in OTHER_MODULES), or `python <script of this repository> --flag ...`, each
        flag found in the script's text."""
        if argv[:1] == ["-m"]:
            module = argv[1] if len(argv) > 1 else ""
            return [] if module in OTHER_MODULES else [f"python -m {module}: not a module the checker knows (add it "
                                                       f"to tests/docsnippets.py: OTHER_MODULES, saying why)"]
        script = REPO_ROOT / argv[0] if argv else REPO_ROOT
        if not script.is_file() or script.suffix != ".py":
            return [f"python {' '.join(argv)}: no script {argv[:1]} in the repository"]
        source = script.read_text(encoding="utf-8")
        return [f"python {argv[0]}: the script has no option {flag}" for flag in
                (word.split("=")[0] for word in argv[1:] if word.startswith("--")) if f'"{flag}"' not in source]

    def tracevote(self, argv: list[str]) -> list[str]:
        return _parse(self.tracevote_parser, argv, "python -m tracevote")

    def dvc(self, argv: list[str]) -> list[str]:
        problems = _parse(self.dvc_parser, argv, "dvc")
        if problems or not argv:
            return problems
        args = self.dvc_parser.parse_args(argv)
        if args.cmd == "repro" or (args.cmd == "run" and argv[0] == "exp"):
            problems += [f"dvc {argv[0]}: no stage {target!r} in dvc.yaml" for target in args.targets or []
                         if not self.is_stage(target)]
        return problems + self.settings(getattr(args, "set_param", None) or [])

    def is_stage(self, target: str) -> bool:
        """A stage, a foreach group, or `group@_placeholder` (prose: `build_pool@<dataset>`)."""
        group, at, item = target.partition("@")
        return target in self.stages | self.groups or (bool(at) and item.startswith("_") and group in self.groups)

    def settings(self, assignments: list[str]) -> list[str]:
        """A command's `-S key=value`s, applied together to the committed params.yaml (as DVC applies them), must
        pass check_params: `-S pool.n_pool=32 -S 'eval.k=[1,32]'` is one change."""
        assignments = [a for a in assignments if a not in PLACEHOLDER_SETTINGS]
        if not assignments:
            return []
        merged: dict[str, Any] = {}
        for assignment in assignments:
            key, _, value = assignment.partition("=")
            override: dict[str, Any] = yaml.safe_load(value)
            for part in reversed(key.split(".")):
                override = {part: override}
            merged = deep_merge(merged, override)
        where = " ".join(f"-S {assignment}" for assignment in assignments)
        return [f"{where}: {problem}" for problem in self.params_problems(merged)]

    def params_problems(self, fragment: dict[str, Any]) -> list[str]:
        """check_params' problems with the committed params.yaml with `fragment` merged onto it."""
        path = self.work / "params.yaml"
        path.write_text(yaml.safe_dump(deep_merge(self.params, fragment), sort_keys=False), encoding="utf-8")
        try:
            load_params(path)
        except ConfigError as exc:
            return [line.replace(f"{path}: ", "") for line in str(exc).splitlines()]
        return []

    def make(self, argv: list[str]) -> list[str]:
        problems = []
        for word in argv:
            if ASSIGNMENT.match(word):
                name = word.split("=", 1)[0]
                if name not in self.make_variables:
                    problems.append(f"make: the Makefile reads no variable {name}")
            elif not word.startswith("-") and word not in self.targets:
                problems.append(f"make: no target {word!r} in the Makefile")
        return problems


def _parse(parser: argparse.ArgumentParser, argv: list[str], program: str) -> list[str]:
    """What `parser` says of `argv` (argparse exits 2 on a bad one, 0 on --help); nothing when it accepts it."""
    errors = io.StringIO()
    logged = _Logged()  # DVC's parser logs its message, then raises where argparse exits
    dvc_logger = logging.getLogger("dvc")
    dvc_logger.addHandler(logged)
    try:
        with contextlib.redirect_stderr(errors), contextlib.redirect_stdout(io.StringIO()):
            parser.parse_args(argv)
    except SystemExit as exc:
        if exc.code:
            return [f"{program} {' '.join(argv)}: {errors.getvalue().strip().splitlines()[-1]}"]
    except DvcParserError:
        return [f"{program} {' '.join(argv)}: {'; '.join(logged.messages) or 'not accepted'}"]
    finally:
        dvc_logger.removeHandler(logged)
    return []


class _Logged(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.ERROR)
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.messages.append(record.getMessage())


def params_snippets(path: Path) -> list[Snippet]:
    """A page's YAML blocks that are fragments of params.yaml."""
    return [snippet for snippet in snippets(path) if snippet.lang in ("yaml", "yml") and snippet.marker != "not params"]


def yaml_problems(snippet: Snippet, checker: Checker) -> list[str]:
    """A params.yaml fragment, merged onto the committed params.yaml after the page's earlier fragments (a page
    may define an endpoint, then put it on several servers), must pass check_params."""
    merged: dict[str, Any] = {}
    for fragment in params_snippets(snippet.path):
        try:
            loaded = yaml.safe_load(fragment.text)
        except yaml.YAMLError as exc:
            return [f"not valid YAML: {exc}"] if fragment == snippet else [f"{fragment.where}: not valid YAML"]
        if not isinstance(loaded, dict):
            return [f"{fragment.where}: not a mapping of params.yaml keys: {loaded!r}"]
        merged = deep_merge(merged, loaded)
        if fragment == snippet:
            return checker.params_problems(merged)
    raise ValueError(f"{snippet.where} is not a params snippet of its page")


def dvc_stages(params_text: str, root: Path) -> set[str]:
    """Every stage address of dvc.yaml (`normalize@aime_2025`, `compare`, ...) as DVC resolves it with these params."""
    from dvc.repo import Repo

    root.mkdir(parents=True)
    (root / "dvc.yaml").write_text((REPO_ROOT / "dvc.yaml").read_text(encoding="utf-8"), encoding="utf-8")
    (root / "params.yaml").write_text(params_text, encoding="utf-8")
    Repo.init(str(root), no_scm=True).close()
    with Repo(str(root)) as repo:
        return {stage.name for stage in repo.index.stages}


def _placeholder_problem(problem: str) -> bool:
    """Prose may name a command without its required arguments or a value (`-S …`), or with a metavar for a value
    (`--method M`)."""
    return ("arguments are required" in problem or "expected one argument" in problem
            or bool(re.search(r"invalid choice: '[A-Z][A-Z_]*'", problem)))


def _unwrapped(words: list[str]) -> list[str]:
    """The command a wrapper runs: `nice -n 15 python x.py` -> `python x.py`, `env A=1 make demo` -> `make demo`."""
    while len(words) > 1 and words[0] in WRAPPERS:
        options, words = WRAPPERS[words[0]], words[1:]
        while len(words) > 1 and (words[0].startswith("-") or ASSIGNMENT.match(words[0])):
            words = words[2:] if words[0] in options else words[1:]
    return words
