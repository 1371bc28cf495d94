"""What every paid stage does around its calls: the fresh-clone guard, retry lines, and the progress bar."""

from __future__ import annotations

import argparse
import contextlib
import os
import shutil
import sys
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Generic, TypeVar

from tracevote.core.config import Params, check_params
from tracevote.core.config_deepconf import DecodingConfig, PoolConfig
from tracevote.core.config_endpoints import ModelConfig, base_urls
from tracevote.core.context_fit import Prompt, check_fit, prompts_of
from tracevote.core.costs import simulated_as, spent_text, worst_case_usd
from tracevote.core.dvcstate import already_built
from tracevote.core.errors import ConfigError, StorageError, TracevoteError
from tracevote.core.fileio import missing_folders
from tracevote.core.progress import progress_bar
from tracevote.core.reads import paused_reads
from tracevote.core.retry import CauseCounter, RetryNotice
from tracevote.core.study_paths import model_stage
from tracevote.datasets.problems import Problem, load_problems
from tracevote.sampling import backend
from tracevote.sampling.budget import SpendCap
from tracevote.sampling.replies import paid_reply
from tracevote.sampling.runner import Conversation, Paid, RunSummary, calls_at_risk, run_calls
from tracevote.store.calls import Call, CallLedger, CallRecord

REBUILD_ENV = "TRACEVOTE_REBUILD"
T = TypeVar("T")


@dataclass(frozen=True)
class PaidStageArgs(Generic[T]):
    """What every paid stage is run with: the params, one dataset and its records (problems, or solutions
    to critique), where its ledgers go and its manifest."""

    stage: str  # as DVC names it: build_pool@aime_2025
    params_path: Path
    params: Params
    dataset: str
    records: list[T]
    folder: Path
    manifest: Path
    endpoint: str | None = None  # one of deepconf.endpoints (`--endpoint`); None: the method's own endpoint

    def refuse_if_already_built(self, *, partial: bool = False) -> None:
        """The fresh-clone guard for this stage (see refuse_if_already_built); TRACEVOTE_REBUILD=1 lifts it."""
        refuse_if_already_built(Path("dvc.lock"), self.params_path, stage=self.stage,
                                rebuild=os.environ.get(REBUILD_ENV) == "1", partial=partial)


def read_paid_stage_args(group: str, description: str, *, folder: str, folder_help: str, records: str = "problems",
                         load: Callable[[str], list[T]] = load_problems,
                         study_group: str | None = None) -> PaidStageArgs[T]:
    """Parse `--params --dataset --<records> --<folder> --manifest`; the dataset must be one params.yaml names,
    and `load` reads its normalized file. With `study_group` (the DVC stage of deepconf.endpoints' models),
    `--endpoint` names one of those models, and the stage is its instance (`build_pool_model@aime_2025-qwen`)."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--params", default="params.yaml", type=Path)
    parser.add_argument("--dataset", required=True, help="a key of datasets: in the params file")
    parser.add_argument(f"--{records}", required=True, dest="records", help="the dataset's normalized file")
    parser.add_argument(f"--{folder}", required=True, type=Path, help=folder_help, dest="folder")
    parser.add_argument("--manifest", required=True, type=Path)
    if study_group is not None:
        parser.add_argument("--endpoint", help="one of deepconf.endpoints (default: deepconf.endpoint)")
    args = parser.parse_args()
    params = check_params(args.params)  # the whole file, as the check_params stage: this stage pays
    params.dataset(args.dataset)
    endpoint = getattr(args, "endpoint", None)
    stage = f"{group}@{args.dataset}"
    if study_group is not None and endpoint is not None:
        check_study_model(params, endpoint)
        stage = model_stage(study_group, args.dataset, endpoint)
    return PaidStageArgs(stage, args.params, params, args.dataset, load(args.records), args.folder, args.manifest,
                         endpoint)


def check_study_model(params: Params, endpoint: str) -> None:
    """`--endpoint` names a model of deepconf.endpoints: those are the ones validated as DeepConf's models (logprobs,
    a sim: key). A guard on the command line, not a setting the stage's output depends on, hence no read noted:
    the stage declares only its own model's keys, so adding a model to the list re-runs none of the others."""
    with paused_reads():
        models = params.deepconf.endpoints
        if endpoint not in models:
            raise ConfigError(f"--endpoint {endpoint}: not one of deepconf.endpoints ({', '.join(models) or 'none'});"
                              f" deepconf.endpoint's own pool is built without --endpoint")


def refuse_if_already_built(lock_path: Path, params_path: Path, *, stage: str, rebuild: bool,
                            partial: bool = False) -> None:
    """Stop before paying when dvc.lock records `stage` finished with these params: its outputs exist in a
    remote or a teammate's cache, and `dvc pull` fetches them for nothing. `partial`: its ledger is on disk
    but lacks calls (cut back by `ledger repair`, or edited by hand), so the message says that instead."""
    if rebuild or not already_built(lock_path, stage, params_path):
        return
    if partial:
        raise TracevoteError(
            f"{lock_path} records a finished {stage} with exactly these params, but the ledger on disk lacks some "
            f"of its calls (cut back by `python -m tracevote ledger repair`, or edited): `dvc checkout` restores the "
            f"recorded copy from DVC's cache, or `dvc pull` from the remote, for nothing. To keep what is on disk "
            f"and pay only for the missing calls, re-run with {REBUILD_ENV}=1.")
    raise TracevoteError(
        f"{lock_path} records a finished {stage} with exactly these params, but its outputs are not on "
        f"disk: they live in a DVC remote or a teammate's cache. Fetch them with `dvc pull` (or "
        f"`make repro`, which pulls first) instead of paying for them again. If they are truly lost, re-run "
        f"with {REBUILD_ENV}=1.")


def check_context(model: ModelConfig, prompts: Iterable[Prompt], max_tokens: int, *, max_tokens_key: str,
                  stage: str) -> None:
    """Refuse, before any request, a setting whose largest request cannot fit `model`'s context window
    (ContextWindowError, one line); print the largest one, on stderr when the window is unknown (unchecked)."""
    fit = check_fit(model, prompts, max_tokens, max_tokens_key=max_tokens_key)
    if fit is not None:
        print(f"{stage}: endpoint {model.endpoint}: {fit.line()}", file=sys.stdout if fit.window else sys.stderr)


def call_prompts(calls: Iterable[Call], what: str) -> list[Prompt]:
    """The prompts of one-call conversations: "critique", "critic call"."""
    return prompts_of(((call.item_id, call.messages) for call in calls), what)


MIN_FREE_BYTES = 16 * 2**20  # the floor of check_free_space: the ledger's own small files and a margin
STORED_BYTES_PER_TOKEN = 8  # a token's stored text and logprob, and 8 more bytes per top-k entry kept


def needed_free_bytes(concurrency: int, max_tokens: int, top_logprobs: int = 0) -> int:
    """The free space a paid stage needs before it sends anything: the worst-case size of every call it can hold
    unstored (calls_at_risk), with a floor of MIN_FREE_BYTES."""
    per_call = max_tokens * STORED_BYTES_PER_TOKEN * (2 + top_logprobs)
    return max(MIN_FREE_BYTES, calls_at_risk(concurrency) * per_call)


def check_free_space(folder: Path, needed: int) -> None:
    """StorageError, before any request is paid for, when `folder`'s disk has less than `needed` bytes free:
    a rerun on a still-full disk pays for nothing."""
    missing = missing_folders(folder)
    free = shutil.disk_usage(missing[-1].parent if missing else folder).free
    if free < needed:
        raise StorageError(f"{folder}: only {free / 2**20:.1f} MiB free, and this stage needs {needed / 2**20:.1f} "
                           f"MiB before it sends anything (the calls it may hold in flight); nothing was sent. "
                           f"Free some space and run it again")


class RetryLines:
    """Prints each retry on stderr ("connecting to http://…: attempt 2/3 failed (connection refused),
    retrying in 1.3 s") until a progress bar takes over (`progress`), which then shows why it waits; retries
    come from worker threads, hence one print per line."""

    def __init__(self) -> None:
        self.progress: CallProgress | None = None

    def show(self, notice: RetryNotice) -> None:
        if self.progress is not None:
            self.progress.waiting(notice)
        else:
            print(notice.render(), file=sys.stderr, flush=True)


class CallProgress:
    """A progress bar of calls with tokens, dollars (or what a simulated run would cost) and retries;
    tqdm adds the rate and the time left. `total` is the most calls the run can make. While a retry waits, the
    line says why ("waiting 30 s: HTTP 429, 12 in a row") until the next call is stored."""

    def __init__(self, total: int, *, desc: str, unit: str, retries: Sequence[CauseCounter]) -> None:
        self._retries = retries  # one counter per client
        self._bar = progress_bar(total=total, unit=unit, desc=desc)
        self._counts = self._counts_text(0, "")

    def on_stored(self, paid: Paid, summary: RunSummary) -> None:
        self.advance(summary.prompt_tokens + summary.completion_tokens, summary.usd, summary.simulated_as)

    def advance(self, tokens: int, usd: float, simulated_as: str | None) -> None:
        """One more call stored; the run's tokens and dollars so far."""
        self._bar.update(1)
        self._counts = self._counts_text(tokens, spent_text(usd, simulated_as))
        self._bar.set_postfix_str(self._counts, refresh=False)

    def waiting(self, notice: RetryNotice) -> None:
        """Called from a worker thread as a retry starts its wait: shown at once (tqdm refreshes under its lock)."""
        self._bar.set_postfix_str(f"{notice.waiting()}; {self._counts}", refresh=True)

    def _counts_text(self, tokens: int, spent: str) -> str:
        retries = sum(counter.total for counter in self._retries)
        return f"tokens={tokens}, retries={retries}" + (f", {spent}" if spent else "")

    def __enter__(self) -> CallProgress:
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 trace: TracebackType | None) -> None:
        self._bar.close()


def run_ledger_calls(ledger: CallLedger, conversations: Iterable[Conversation[CallRecord]], *, model: ModelConfig,
                     pool: PoolConfig, stage: str, decoding: DecodingConfig, api_keys: Mapping[str, str | None],
                     concurrency: int, total: int, unit: str, problems: list[Problem] | None = None,
                     first_errors: Mapping[str, int] | None = None, reached: Mapping[str, bool] | None = None,
                     cap: SpendCap | None = None, routes: Mapping[str, ModelConfig] | None = None,
                     settings: str = "decoding") -> RunSummary:
    """Run text-only conversations into `ledger` on `model` with `decoding` (calls of a kind in `routes` go to
    that kind's model instead: the debate's judge): retry lines until the progress bar (at most `total` calls of
    `unit`) takes over, the retries by cause at the end, and the ledger marked simulated when the simulator
    answers (the runner refuses to mix its replies with real ones). `api_keys` holds each endpoint's key by its
    name; `problems`, `first_errors` and `reached` are what the simulator knows. `cap` is checked before each call
    (see SpendCap); each call is priced at its own endpoint's prices. `settings` names the params.yaml section
    `decoding` comes from (debate, critique, grading.critic), which a refusal's message points at."""
    models = {model.endpoint: model} | {routed.endpoint: routed for routed in (routes or {}).values()}
    servers = sum(len(base_urls(each.base_url)) for each in models.values())
    check_free_space(ledger.root, needed_free_bytes(concurrency * servers, decoding.max_tokens))
    retries = RetryLines()
    with contextlib.ExitStack() as stack:
        stack.enter_context(ledger.exclusive())  # a second run of the same stage stops here, having paid nothing
        clients = {key: stack.enter_context(backend.open_client(
            each, decoding, problems or [], api_keys.get(key), pool=pool, concurrency=concurrency,
            first_errors=first_errors, reached=reached, on_retry=retries.show, settings=settings))
            for key, each in models.items()}

        def model_for(call: Call) -> ModelConfig:
            return (routes or {}).get(call.kind, model)

        def worst(call: Call) -> float:
            return worst_case_usd(call.messages, call.max_tokens or decoding.max_tokens, model_for(call).priced())

        def pay(call: Call) -> Paid[CallRecord]:
            chosen = model_for(call)
            return paid_reply(clients[chosen.endpoint], call, chosen.priced())

        counters = [client.retries for client in clients.values()]
        with CallProgress(total, desc=stage, unit=unit, retries=counters) as bar:
            retries.progress = bar  # from here the progress bar counts retries and says why it waits
            summary = RunSummary(simulated_as=simulated_as(model), unit=f"{unit}s", priced_as=model.name)
            run_calls(ledger, conversations, pay, concurrency=sum(c.capacity for c in clients.values()),
                      summary=summary, on_stored=bar.on_stored, cap=cap, worst_usd=worst)
        for client in clients.values():
            print(backend.retry_report(client))
    return summary
