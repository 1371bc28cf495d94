"""The params a DVC stage declares in dvc.yaml, as DVC resolves them (`foreach` entries and `${...}` filled in).

    declared_params("fetch@aime_2025")  -> ("datasets.aime_2025.source",)
    declared_params("check_params")     -> None (it declares no params: it depends on the whole file)

load_params asks it only when params.yaml has a problem, so that an offline stage fails on the problems of the
keys it reads and leaves the others to the stages that read them (a paid stage refuses every problem:
tracevote.core.config.check_params).
"""

from __future__ import annotations

from collections.abc import Collection
from fnmatch import fnmatch
from pathlib import Path


def declared_params(stage: str, root: Path | None = None) -> tuple[str, ...] | None:
    """The params keys of `stage` (its DVC address); None when it declares none or DVC cannot say."""
    from dvc.dependency.param import ParamsDependency  # slow to import: only on the error path
    from dvc.exceptions import DvcException
    from dvc.repo import Repo

    try:
        with Repo(None if root is None else str(root)) as repo:
            stages = repo.stage.collect(stage)
    except DvcException:
        return None  # subtle: then the stage reports every problem, as it did before stages were told apart
    keys = tuple(key for found in stages for dep in found.deps if isinstance(dep, ParamsDependency)
                 for key in dep.params)
    return keys or None


def every_stage_params(root: Path) -> dict[str, tuple[str, ...]]:
    """Each stage's declared params keys by its DVC address (one Repo for all: a stage at a time takes a second)."""
    from dvc.dependency.param import ParamsDependency
    from dvc.repo import Repo

    with Repo(str(root)) as repo:
        return {stage.name: tuple(key for dep in stage.deps if isinstance(dep, ParamsDependency)
                                   for key in dep.params) for stage in repo.index.stages}


# Keys a stage reads without declaring them, on purpose: they decide how the work is done (how fast, how often
# retried, on which servers with which key, what it may spend), never what it writes. Declaring one would re-run
# the stage for nothing, so no stage may declare a key that holds one (`debate` would hold debate.concurrency).
OPERATIONAL_KEYS = {
    "*.concurrency": "requests in flight",
    "*.max_cost_usd": "a spending cap: the stage refuses before paying, or stops",
    "pool.max_retries": "retries of a failed request",
    "pool.request_timeout_s": "how long one request may take",
    "pool.allow_uninformative_logprobs": "whether the probe's verdict stops the build, not what it stores",
    "pool.samples_per_request": "traces per request (`n`): other draws of the same distribution, each sample id "
                                "its own trace",
    "grading.workers": "Math-Verify processes",
    "endpoints.*.base_url": "which servers answer (replicas of one model)",
    "endpoints.*.api_key_env": "where the key is read from",
    "endpoints.*.needs_key": "whether a key is required",
    "endpoints.*.allow_foreign_key": "whether a provider's key may go to another host",
    "endpoints.*.pricing.*": "list prices: the estimate and the spending cap",
    "endpoints.*.context_window": "whether a stage refuses before paying; the window itself is the server's",
}

# What the stage after a paid build reads of the setting its ledger was built under, only to check the ledger is
# params.yaml's (and to write the model's name): the build stage declares those keys, and its new ledger re-runs
# the later stage through its dependency on the ledger's folder. (One stage could not declare each of
# critique.datasets' steps_format anyway.)
LEDGER_CHECKS = {
    "score_debate": ("model.*", "endpoints.*"),
    "score_critiques": ("model.*", "endpoints.*", "critique.endpoint", "datasets.*.steps_format"),
    "grade@*": ("model.*", "endpoints.*"),
    "view": ("model.*", "endpoints.*", "critique.endpoint", "datasets.*.steps_format"),  # its debates and critiques
}

# Keys particular stages read without declaring them, for another reason than OPERATIONAL_KEYS', by (stage, key)
# patterns.
STAGE_UNDECLARED = {
    ("fetch@*", "datasets.*"): "the checks before the raw file is replaced decide whether fetch writes, not what "
                               "(normalize declares the entry); a source.pool's dataset entry reaches fetch through "
                               "the pool's manifest, which its normalize and build_pool rewrite",
    **{(stage, key): "only to check each ledger's setting: the build stage declares it, and its new ledger re-runs "
                     "this stage" for stage, keys in LEDGER_CHECKS.items() for key in keys},
}

# Keys particular stages declare though they hold operational keys, by (stage, declared key) patterns: the study's
# dollars are priced at each model's endpoints.<key>.pricing, and DVC cannot name each of deepconf.endpoints' keys.
STAGE_DECLARED_WHOLE = {("study@*", "endpoints"): "each model's pricing; the study is offline and takes seconds"}


def covers(outer: str, key: str) -> bool:
    """covers("debate", "debate.agents") and covers("debate.agents", "debate.agents") hold; covers("eva", "eval")
    not."""
    return key == outer or key.startswith(outer + ".")


def declaration_problems(stage: str, reads: Collection[str], declared: Collection[str],
                         leaves: Collection[str]) -> list[str]:
    """What is wrong with `stage`'s dvc.yaml params (`declared`) against the keys a run of it read (`reads`):
    a read nothing declares (unless listed above), a declared key it never read, a declared key holding an
    operational one. `leaves`: every key of the project's params.yaml, to find what a declared key holds.

        declaration_problems("score_debate", ["debate.agents"], ["debate"], ["debate.agents", "debate.concurrency"])
        -> ["score_debate declares debate, which holds debate.concurrency (requests in flight): ..."]
    """
    problems = []
    for key in sorted(reads):
        exempt = _operational(key) or any(fnmatch(stage, where) and fnmatch(key, pattern)
                                          for (where, pattern) in STAGE_UNDECLARED)
        if not exempt and not any(covers(outer, key) for outer in declared):
            problems.append(f"{stage} reads {key}, which it does not declare in dvc.yaml's params")
    for outer in declared:
        if not any(covers(outer, key) or covers(key, outer) for key in reads):
            problems.append(f"{stage} declares {outer}, which it never read")
        if any(fnmatch(stage, where) and fnmatch(outer, pattern) for (where, pattern) in STAGE_DECLARED_WHOLE):
            continue
        for key in sorted(leaf for leaf in leaves if covers(outer, leaf) and _operational(leaf)):
            problems.append(f"{stage} declares {outer}, which holds {key} ({_operational(key)}): a change to it "
                            f"would re-run the stage for nothing; declare the keys it reads")
    return problems


def _operational(key: str) -> str | None:
    return next((why for pattern, why in OPERATIONAL_KEYS.items() if fnmatch(key, pattern)), None)
