"""params.yaml's `datasets:` (where each dataset comes from and how its rows read) and `answers:` (how an answer
is taken from a trace), with the key-name rule every named entry of params.yaml follows."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

from tracevote.core.typedconfig import param, report

IntegerFormat = Literal["aime", "integer"]
AnswerFormat = Literal["aime", "integer", "math"]
DatasetKind = Literal["problems", "steps"]
StepsFormat = Literal["processbench", "deltabench"]
Fallback = Literal["last_integer", "none"]
INTEGER_FORMATS: tuple[IntegerFormat, ...] = ("aime", "integer")
# The keys of datasets:, grading.runs: and endpoints: name files (data/<name>.jsonl, pools/<name>/), DVC stages and
# params paths: `.match` needs the whole name to fit (\Z, not $, which would let a trailing newline through), and
# 64 characters keep every path short. subtle: no '.': dvc.yaml declares datasets.${key}, grading.runs.${key} and
# endpoints.<key>.name, and DVC reads every '.' of a params path as a level, so `gpt-4.1` would make every stage
# of a method on it fail with "missing from params.yaml"
_KEY = "[A-Za-z0-9][A-Za-z0-9_-]{0,63}"
KEY_NAME = re.compile(_KEY + r"\Z")
KEY_NAME_PATTERN = f"^{_KEY}$"  # the same rule, as the JSON Schema writes it
DATASET_NAME = KEY_NAME  # the name its importers know it by
KEY_NAME_RULE = "1-64 letters, digits, '_', '-' (no '.', which DVC reads as a level of params.yaml)"
# What fetch@<name> depends on in dvc.yaml (`deps: - ${item.source.watch}`) when its source is the hub. subtle: DVC
# has no optional dependency (a null dep stops every dvc command with an AssertionError, and `deps:` cannot be
# interpolated from a list), so every entry names one: its local `path`, or this stand-in, which a hub source
# never reads
HUB_WATCH = "stages/fetch.py"
# What fetch@<name> depends on when its source is another dataset's pool: build_pool@<pool>'s manifest (dvc.yaml's
# pools/${item}.json), which changes whenever the pool's setting, size or problems do
POOL_MANIFEST = "pools/{pool}.json"


@dataclass(frozen=True)
class SourceConfig:
    """Where a dataset's rows come from: a Hugging Face dataset, or a local file."""

    hf_dataset: str | None = param("the Hugging Face dataset (owner/name), read through the datasets-server rows "
                                   "API; null: read `path` instead")
    hf_config: str = param("the Hugging Face dataset's config (subset)")
    hf_split: str = param("the Hugging Face dataset's split")
    api_url: str = param("the datasets-server that serves the rows")
    path: str | None = param("a local .jsonl, .json, .parquet or .csv file (or a folder of problem files) read "
                             "instead of the hub")
    watch: str = param("the file or folder fetch depends on in dvc.yaml, so that editing it marks fetch stale: "
                       f"the same as `path` when that is set, {POOL_MANIFEST} when `pool` is, else {HUB_WATCH} "
                       "(DVC has no optional dependency)")
    pool: str | None = param("kind steps only: a dataset of kind problems from the tinymath generator whose DeepConf "
                             "pool's traces become this dataset's solutions, each labelled with its first wrong line "
                             "by the generator's step values (docs/methods/critique.md); null: hf_dataset or path",
                             None)
    per_problem: int | None = param("with `pool`: at most this many distinct solutions per problem, half without an "
                                    "error and half with one where the pool has both; null: every one", 4, ge=1)
    sample_seed: int = param("with `pool`: the seed of the choice of solutions per problem", 0, ge=0)

    def validate(self, where: str) -> None:
        if self.pool is not None:
            self._validate_pool(where)
            return
        if not self.hf_dataset and not self.path:
            report(where, "set hf_dataset or path (both are empty)")
        expected = self.path or HUB_WATCH
        if self.watch != expected:
            why = ("so that editing that file marks fetch stale" if self.path else
                   "the stand-in a hub source depends on")
            report(f"{where}.watch", f"{self.watch!r} must be {expected!r} ({why}); set watch: {expected}")

    def _validate_pool(self, where: str) -> None:
        for key, value in (("hf_dataset", self.hf_dataset), ("path", self.path)):
            if value:
                report(f"{where}.{key}", f"{value!r} must be null when pool is set ({self.pool!r}): a dataset's rows "
                                         "come from one source")
        expected = POOL_MANIFEST.format(pool=self.pool)
        if self.watch != expected:
            report(f"{where}.watch", f"{self.watch!r} must be {expected!r} (the manifest of the pool it reads, so "
                                     f"that a changed pool marks fetch stale); set watch: {expected}")


@dataclass(frozen=True)
class DatasetConfig:
    """One entry of `datasets:`; its key is its name, which names its files (data/<name>.jsonl) and ids."""

    name: str = param("the entry's key in datasets: (names data/<name>.jsonl, its stages and ids)")
    source: SourceConfig = param("where the rows come from")
    kind: DatasetKind = param("problems: a problem and its gold answer; steps: a solution's steps and the first "
                              "wrong step (ProcessBench's label, -1: none)")
    problem_key: str = param("the row field holding the problem")
    answer_key: str = param("the row field holding the gold answer (for kind steps: the label)")
    id_key: str | None = param("the row field holding the id; null: ids are <name>-<row number, two digits>")
    answer_format: AnswerFormat = param("aime: an integer 0-999 (\"025\" is 25); integer: any integer (GSM8K's "
                                        "\"... #### 18\" gives 18); math: LaTeX, compared with Math-Verify")
    steps_format: StepsFormat = param("kind steps only: the rows' layout; deltabench rows are converted to steps",
                                      "processbench")
    task: str | None = param("kind steps only: the task every record belongs to; null: the row's own task, else "
                             "the hub split, else the dataset name", None)

    def validate(self, where: str) -> None:
        if not DATASET_NAME.match(self.name):
            report(where, f"the dataset name {self.name!r} must be {KEY_NAME_RULE}; it names files and DVC stages")


@dataclass(frozen=True)
class AnswersConfig:
    """Where a trace without a boxed answer may still get one (see tracevote.answers.extract.resolve_answer)."""

    fallback: Fallback = param("no \\boxed{}: last_integer takes the last number in the text; none gives no answer "
                               "(the official code's rule)")
    truncated_fallback: bool = param("false: a trace cut off at max_tokens gave no final answer and never takes the "
                                     "fallback")
