"""Import the official DeepConf offline runs' pickles (facebookresearch/deepconf, branch `reproduce`,
`deepconf-offline.py`) as confidence-only samples, so runs already paid for can be re-analysed here.

Each file `deepconf_simple_qid<q>_rid<r>_<YYYYmmdd_HHMMSS>.pkl` holds one run on one problem: a dict with
`question_id` (0-based row of the official dataset file), `ground_truth` and `all_traces`, a list of
{`text`, `confs`, `num_tokens`, `stop_reason`, `extracted_answer`, ...}. `confs` are the per-token
confidences C_i (the negated mean of the top-20 logprobs, rounded to 3 decimals by the official code).

Mapping (documented in docs/pool-store.md, "Importing the official DeepConf pickles"):
- question_id q is the q-th problem of the dataset's normalized file, and the pickle's ground_truth must
  equal that problem's answer, else nothing is imported.
- Sample ids number a problem's traces in run order: files sorted by (run id, timestamp), traces in
  file order. Importing the same files again stores nothing new.
- A sample keeps the text, finish reason and C_i. The answer is re-extracted from the text by our
  rules, not taken from `extracted_answer`. It has no token strings and no logprobs: its tokens are
  `num_tokens` empty strings, and any token beyond len(confs) has no confidence (NaN).
- `num_tokens` is trusted only as far as the pickle carries data for it: it must lie in
  len(confs)..len(token_ids) (len(confs) when the trace has no `token_ids`), so a corrupt count such as
  10**11 is an error before anything is allocated for it. And a file's traces together may claim no more
  tokens and text characters than the file has bytes: pickle can repeat one object by reference, so a
  small file could otherwise name the same long trace a million times.

Unpickling runs code named in the file. `SafeUnpickler` admits only plain containers, numbers,
strings and numpy arrays, and refuses any other global with a DataError naming the file.
"""

from __future__ import annotations

import io
import pickle
import re
from collections.abc import Callable, Iterator
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from tracevote.answers.extract import extract_answer
from tracevote.core.errors import DataError
from tracevote.datasets.problems import Problem
from tracevote.store import codec
from tracevote.store.frame_writer import FrameWriter
from tracevote.store.pool import Pool
from tracevote.store.records import Sample

OFFLINE_NAME = re.compile(r"^deepconf_simple_qid(\d+)_rid([^_]+)_(\d{8}_\d{6})\.pkl$")
ONLINE_NAME = re.compile(r"^deepconf_qid(\d+)_rid([^_]+)_(\d{8}_\d{6})\.pkl$")
# What numpy arrays, numpy scalars and Python's array module need to be rebuilt; nothing else runs.
ADMITTED_GLOBALS = frozenset({
    ("builtins", "set"), ("builtins", "frozenset"), ("builtins", "complex"),
    ("__builtin__", "set"), ("__builtin__", "frozenset"), ("__builtin__", "complex"),  # protocol 2's names
    ("numpy", "ndarray"), ("numpy", "dtype"),
    ("numpy.core.multiarray", "_reconstruct"), ("numpy._core.multiarray", "_reconstruct"),
    ("numpy.core.multiarray", "scalar"), ("numpy._core.multiarray", "scalar"),
    ("numpy.core.numeric", "_frombuffer"), ("numpy._core.numeric", "_frombuffer"),
    ("array", "array"), ("array", "_array_reconstructor"),
    ("_codecs", "encode"),  # protocol 2 writes bytes as _codecs.encode(text, "latin1")
})


class RefusedGlobal(pickle.UnpicklingError):
    pass


class SafeUnpickler(pickle.Unpickler):
    """An Unpickler that resolves only ADMITTED_GLOBALS; any other class or function is refused."""

    def find_class(self, module: str, name: str) -> Any:
        if (module, name) not in ADMITTED_GLOBALS:
            raise RefusedGlobal(f"{module}.{name}")
        return super().find_class(module, name)

    def persistent_load(self, pid: Any) -> Any:
        raise RefusedGlobal(f"persistent id {pid!r}")


def safe_load(path: Path) -> Any:
    """The object pickled in `path`, rebuilt by SafeUnpickler."""
    try:
        return SafeUnpickler(io.BytesIO(path.read_bytes())).load()
    except RefusedGlobal as exc:
        raise DataError(f"{path}: refused to unpickle {exc}: only plain containers, numbers, strings and numpy "
                        "arrays are admitted (unpickling anything else can run code)") from None
    except (pickle.UnpicklingError, EOFError, ValueError, TypeError, AttributeError, IndexError) as exc:
        raise DataError(f"{path}: not a readable pickle ({type(exc).__name__}: {exc})") from None


@dataclass(frozen=True)
class RunFile:
    path: Path
    question_id: int
    run_id: str
    timestamp: str


@dataclass(frozen=True)
class PickleImport:
    files: int
    samples: int
    stored: int
    already_stored: int
    padded: int  # samples with fewer confidences than tokens (the rest have none)


def run_files(folder: Path) -> list[RunFile]:
    """The offline runs' pickles in `folder`, by (question, run id, timestamp); an online run's pickle, or
    any other .pkl, is an error (online runs keep no per-token confidences)."""
    if not folder.is_dir():
        raise DataError(f"{folder}: not a folder (expected the official code's outputs/ folder of .pkl files)")
    runs, others = [], []
    for path in sorted(folder.glob("*.pkl")):
        match = OFFLINE_NAME.match(path.name)
        if match:
            runs.append(RunFile(path, int(match[1]), match[2], match[3]))
        else:
            others.append(path.name)
    if others:
        online = [name for name in others if ONLINE_NAME.match(name)]
        why = (f"{len(online)} are online runs, whose traces keep no per-token confidences; "
               if online else "")
        raise DataError(f"{folder}: {len(others)} .pkl file(s) are not offline runs named "
                        f"deepconf_simple_qid<q>_rid<r>_<timestamp>.pkl ({why}first: {others[0]}); move them aside")
    if not runs:
        raise DataError(f"{folder}: no deepconf_simple_qid<q>_rid<r>_<timestamp>.pkl file")
    return sorted(runs, key=lambda r: (r.question_id, _natural(r.run_id), r.timestamp))


def _natural(run_id: str) -> tuple[int, int | str]:
    return (0, int(run_id)) if run_id.isdigit() else (1, run_id)


def read_run(run: RunFile, problems: list[Problem], first_sample_id: int, model: str | None = None) -> list[Sample]:
    """The samples of one run's pickle, numbered from first_sample_id; bad content raises naming the field."""
    data = safe_load(run.path)
    where = str(run.path)
    if not isinstance(data, dict) or not isinstance(data.get("all_traces"), list | tuple):
        raise DataError(f"{where}: expected a dict with a list 'all_traces' (an offline run's result)")
    config = data.get("config") if isinstance(data.get("config"), dict) else {}
    if model is not None and config.get("model_path", model) != model:
        raise DataError(f"{where}: config.model_path is {config['model_path']!r:.100}, but the pool is for {model!r} "
                        "(set model.name to the run's model, or name a pool with --pool-dir)")
    problem = _problem_of(run, data, problems)
    if not data["all_traces"]:
        raise DataError(f"{where}: field 'all_traces' is empty (expected the run's traces)")
    room = run.path.stat().st_size  # every token and text character takes at least one byte of the file
    samples = []
    for i, trace in enumerate(data["all_traces"]):
        samples.append(_sample(trace, f"{where}: all_traces[{i}]", problem.id, first_sample_id + i, room))
        room -= samples[-1].completion_tokens + len(samples[-1].text)
    return samples


def _problem_of(run: RunFile, data: dict[str, Any], problems: list[Problem]) -> Problem:
    question_id = data.get("question_id", run.question_id)
    if question_id != run.question_id:
        raise DataError(f"{run.path}: question_id {question_id!r} disagrees with the file name (qid {run.question_id})")
    if not 0 <= run.question_id < len(problems):
        raise DataError(f"{run.path}: question_id {run.question_id} is outside the dataset's {len(problems)} problems")
    problem = problems[run.question_id]
    gold = str(data.get("ground_truth", "")).strip()
    if gold != str(problem.answer) and _as_int(gold) != problem.answer:
        raise DataError(f"{run.path}: ground_truth {gold!r} is not the answer of problem {problem.id} "
                        f"({problem.answer!r}): the dataset is not the one the run used, or its order differs")
    return problem


def _as_int(text: str) -> int | None:
    try:
        return int(text)
    except ValueError:
        return None


def _sample(trace: Any, where: str, problem_id: str, sample_id: int, room: int) -> Sample:
    """The trace as a sample, if its tokens and text fit in the `room` bytes of the file not yet claimed."""
    if not isinstance(trace, dict):
        raise DataError(f"{where}: expected a dict, got {type(trace).__name__}")
    text = trace.get("text")
    if not isinstance(text, str):
        raise DataError(f"{where}: field 'text': expected a string, got {type(text).__name__}")
    confs = _confidences(trace.get("confs"), where)
    n_tokens = _token_count(trace, len(confs), where)
    if n_tokens + len(text) > room:
        raise DataError(f"{where}: the traces so far claim more tokens and text than the file's bytes can hold "
                        f"(one trace repeated by reference?)")
    confidence = np.full(int(n_tokens), np.nan, dtype=np.float32)
    confidence[:len(confs)] = confs
    finish = trace.get("stop_reason")
    return Sample(problem_id=problem_id, sample_id=sample_id, text=text, tokens=[""] * int(n_tokens),
                  token_logprobs=np.full(int(n_tokens), np.nan, dtype=np.float32), top_logprobs=None,
                  top_tokens=None, token_confidence=confidence, answer=extract_answer(text),
                  finish_reason=str(finish) if finish else "unknown", prompt_tokens=0,
                  completion_tokens=int(n_tokens), latency_s=0.0)


def _token_count(trace: dict[str, Any], n_confs: int, where: str) -> int:
    """`num_tokens`, bounded by the data the trace carries (checked before anything is allocated for it):
    at least one token per confidence, at most one per token id (or per confidence, without token ids)."""
    token_ids = trace.get("token_ids")
    if token_ids is not None and (not isinstance(token_ids, list | tuple | np.ndarray) or np.ndim(token_ids) != 1):
        raise DataError(f"{where}: field 'token_ids': expected a flat list of token ids, got "
                        f"{type(token_ids).__name__}")
    most = n_confs if token_ids is None else max(len(token_ids), n_confs)
    n_tokens = trace.get("num_tokens", n_confs)
    if isinstance(n_tokens, bool) or not isinstance(n_tokens, int | np.integer) or not n_confs <= n_tokens <= most:
        carried = f"len(token_ids) {len(token_ids)}" if token_ids is not None else "no token_ids"
        shown = int(n_tokens) if isinstance(n_tokens, np.integer) else n_tokens
        raise DataError(f"{where}: field 'num_tokens': {shown!r:.40} must be an integer in {n_confs}..{most} "
                        f"(len(confs) {n_confs}, {carried}): the pickle carries no data for more tokens")
    return int(n_tokens)


def _confidences(confs: Any, where: str) -> np.ndarray:
    try:
        values = np.asarray(confs if confs is not None else [], dtype=np.float64)
    except (TypeError, ValueError):
        raise DataError(f"{where}: field 'confs': expected a list of numbers") from None
    if values.ndim != 1 or not np.all(np.isfinite(values)):
        raise DataError(f"{where}: field 'confs': expected a flat list of finite numbers")
    return values.astype(np.float32)


def import_runs(folder: Path, open_pool: Callable[[], Pool], problems: list[Problem], *,
                n_pool: int | None, model: str | None = None) -> tuple[Pool, PickleImport]:
    """Check every pickle in `folder`, then open the pool (opening a new setting's pool creates its folder,
    so nothing is created if a pickle is bad; `open_pool` returns it with the problems' prompts registered)
    and append the samples it lacks.
    n_pool bounds the sample ids per problem (0..n_pool-1); None admits any. `model`, when given, must be
    every run's config.model_path: a pool holds one model's traces."""
    runs = run_files(folder)
    counts = _check_all(runs, problems, n_pool, model)
    pool = open_pool()
    if pool.simulated:
        raise DataError(f"{pool.root}: a simulated pool (the params select model.backend: sim), but the official "
                        f"runs' pickles hold a real model's traces; import them with params naming that model "
                        f"(model.name: {model or 'its config.model_path'}) on a real backend")
    stored = already = padded = 0
    with ExitStack() as stack:
        writers: dict[str, FrameWriter] = {}
        for samples in _samples_in_order(runs, problems):
            for sample in samples:
                if sample.problem_id not in writers:
                    writers[sample.problem_id] = stack.enter_context(pool.writer(sample.problem_id))
                writer = writers[sample.problem_id]
                padded += int(np.isnan(sample.token_confidence).any())  # type: ignore[arg-type]
                if sample.sample_id in writer.keys:
                    already += 1
                    continue
                writer.append(sample.sample_id, codec.encode(sample))
                stored += 1
    pool.write_confidence_blocks(writers)  # the logs are closed: each problem's block, for the score stage
    return pool, PickleImport(files=len(runs), samples=sum(counts.values()), stored=stored,
                              already_stored=already, padded=padded)


def _samples_in_order(runs: list[RunFile], problems: list[Problem],
                      model: str | None = None) -> Iterator[list[Sample]]:
    """Each run's samples, numbered on from the previous runs of the same problem."""
    next_id: dict[int, int] = {}
    for run in runs:
        samples = read_run(run, problems, next_id.get(run.question_id, 0), model)
        next_id[run.question_id] = next_id.get(run.question_id, 0) + len(samples)
        yield samples


def _check_all(runs: list[RunFile], problems: list[Problem], n_pool: int | None,
               model: str | None) -> dict[str, int]:
    """Samples per problem id, after reading every file once; the first problem raises."""
    counts: dict[str, int] = {}
    for samples in _samples_in_order(runs, problems, model):
        for sample in samples:
            counts[sample.problem_id] = counts.get(sample.problem_id, 0) + 1
    too_many = {pid: n for pid, n in counts.items() if n_pool is not None and n > n_pool}
    if too_many:
        pid, n = next(iter(too_many.items()))
        raise DataError(f"problem {pid}: the pickles hold {n} traces, more than pool.n_pool ({n_pool}); raise "
                        "pool.n_pool or pass --allow-any-sample-id")
    return counts
