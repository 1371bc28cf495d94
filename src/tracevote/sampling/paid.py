"""What every paid stage does around its calls: the fresh-clone guard, retry lines, and the progress bar."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Generic, TypeVar

from tqdm import tqdm

from tracevote.core.config import DecodingConfig, Params, load_params
from tracevote.core.dvcstate import already_built
from tracevote.core.errors import TracevoteError
from tracevote.core.retry import CauseCounter, RetryNotice
from tracevote.datasets.problems import Problem, load_problems
from tracevote.sampling import backend
from tracevote.sampling.budget import simulated_as, spent_text
from tracevote.sampling.replies import paid_reply
from tracevote.sampling.runner import Conversation, Paid, RunSummary, run_calls
from tracevote.store.calls import CallLedger, CallRecord

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

    def refuse_if_already_built(self) -> None:
        """The fresh-clone guard for this stage (see refuse_if_already_built); TRACEVOTE_REBUILD=1 lifts it."""
        refuse_if_already_built(Path("dvc.lock"), self.params_path, stage=self.stage,
                                rebuild=os.environ.get(REBUILD_ENV) == "1")


def read_paid_stage_args(group: str, description: str, *, folder: str, folder_help: str, records: str = "problems",
                         load: Callable[[str], list[T]] = load_problems) -> PaidStageArgs[T]:
    """Parse `--params --dataset --<records> --<folder> --manifest`; the dataset must be one params.yaml names,
    and `load` reads its normalized file."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--params", default="params.yaml", type=Path)
    parser.add_argument("--dataset", required=True, help="a key of datasets: in the params file")
    parser.add_argument(f"--{records}", required=True, dest="records", help="the dataset's normalized file")
    parser.add_argument(f"--{folder}", required=True, type=Path, help=folder_help, dest="folder")
    parser.add_argument("--manifest", required=True, type=Path)
    args = parser.parse_args()
    params = load_params(args.params)
    params.dataset(args.dataset)
    return PaidStageArgs(f"{group}@{args.dataset}", args.params, params, args.dataset, load(args.records),
                         args.folder, args.manifest)


def refuse_if_already_built(lock_path: Path, params_path: Path, *, stage: str, rebuild: bool) -> None:
    """Stop before paying when dvc.lock records `stage` finished with these params: its outputs exist in a
    remote or a teammate's cache, and `dvc pull` fetches them for nothing."""
    if rebuild or not already_built(lock_path, stage, params_path):
        return
    raise TracevoteError(
        f"{lock_path} records a finished {stage} with exactly these params, but its outputs are not on "
        f"disk: they live in a DVC remote or a teammate's cache. Fetch them with `dvc pull` (or "
        f"`make repro`, which pulls first) instead of paying for them again. If they are truly lost, re-run "
        f"with {REBUILD_ENV}=1.")


class RetryLines:
    """Prints each retry on stderr ("connecting to http://…: attempt 2/3 failed (connection refused),
    retrying in 1.3 s") until `quiet`; retries come from worker threads, hence one print per line."""

    def __init__(self) -> None:
        self.quiet = False

    def show(self, notice: RetryNotice) -> None:
        if not self.quiet:
            print(notice.render(), file=sys.stderr, flush=True)


class CallProgress:
    """A progress bar of calls with tokens, dollars (or what a simulated run would cost) and retries;
    tqdm adds the rate and the time left. `total` is the most calls the run can make."""

    def __init__(self, total: int, *, desc: str, unit: str, retries: CauseCounter) -> None:
        self._retries = retries
        self._bar = tqdm(total=total, unit=unit, desc=desc, dynamic_ncols=True, mininterval=1.0)

    def on_stored(self, paid: Paid, summary: RunSummary) -> None:
        self._bar.update(1)
        tokens = summary.prompt_tokens + summary.completion_tokens
        self._bar.set_postfix_str(f"tokens={tokens}, retries={self._retries.total}, "
                                  f"{spent_text(summary.usd, summary.simulated_as, digits=2)}", refresh=False)

    def __enter__(self) -> CallProgress:
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 trace: TracebackType | None) -> None:
        self._bar.close()


def run_ledger_calls(ledger: CallLedger, conversations: Iterable[Conversation[CallRecord]], *, params: Params,
                     stage: str, decoding: DecodingConfig, api_key: str | None, concurrency: int, total: int,
                     unit: str, problems: list[Problem] | None = None,
                     first_errors: Mapping[str, int] | None = None,
                     reached: Mapping[str, bool] | None = None) -> RunSummary:
    """Run text-only conversations into `ledger` on params.model with `decoding`: retry lines until the progress
    bar (at most `total` calls of `unit`) takes over, the retries by cause at the end, and the ledger marked
    simulated when the simulator answers (the runner refuses to mix its replies with real ones). `problems`,
    `first_errors` and `reached` are what the simulator knows."""
    retries = RetryLines()
    with backend.open_client(params.model, decoding, problems or [], api_key, pool=params.pool,
                             concurrency=concurrency, first_errors=first_errors, reached=reached,
                             on_retry=retries.show) as client:
        retries.quiet = True  # from here the progress bar counts retries
        with CallProgress(total, desc=stage, unit=unit, retries=client.retries) as bar:
            summary = RunSummary(simulated_as=simulated_as(params.model), unit=f"{unit}s")
            run_calls(ledger, conversations, lambda call: paid_reply(client, call, params.pool.pricing),
                      concurrency=client.capacity, summary=summary, on_stored=bar.on_stored)
        print(backend.retry_report(client))
    return summary
