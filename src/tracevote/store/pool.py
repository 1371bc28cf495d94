"""Trace pools: one folder per (dataset, setting), one append-only frame log per problem.

    pools/<dataset>/<model>-<fingerprint>/pool.json          the setting, and whether it is simulated
    pools/<dataset>/<model>-<fingerprint>/problems.json      problem id -> sha256 of its prompt
    pools/<dataset>/<model>-<fingerprint>/samples/<id>.tvf   the samples (see framing, codec)

The setting (model, prompt, decoding) decides the folder, so changing any of it starts a new pool
beside the old one, and switching back finds the old one complete. `pool.n_pool` is not part of
the setting: raising it tops the same pool up.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable, Iterator
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np
import orjson

from tracevote.core.config import Params
from tracevote.core.errors import DataError
from tracevote.core.fileio import write_json
from tracevote.datasets.problems import Problem
from tracevote.sampling.prompts import build_messages
from tracevote.store import codec, framing
from tracevote.store.records import ProblemTraces, Sample

POOL_FORMAT = 1
SAMPLES_DIR = "samples"
LOG_SUFFIX = ".tvf"


@dataclass(frozen=True)
class Setting:
    """Everything that changes what a sampled trace looks like; its hash names the pool."""

    backend: str
    model: str
    extra_body: str  # canonical JSON, so the setting stays hashable
    sim: str | None
    system: str | None
    template: str
    temperature: float
    top_p: float | None
    max_tokens: int
    top_logprobs: int

    @classmethod
    def from_params(cls, params: Params) -> Setting:
        model, decoding = params.model, params.decoding
        sim = _canonical(asdict(model.sim)) if model.backend == "sim" else None
        return cls(backend=model.backend, model=model.name, extra_body=_canonical(model.extra_body), sim=sim,
                   system=params.prompt.system, template=params.prompt.template,
                   temperature=decoding.temperature, top_p=decoding.top_p, max_tokens=decoding.max_tokens,
                   top_logprobs=decoding.top_logprobs)

    def messages(self, problem: Problem) -> list[dict[str, str]]:
        """The chat messages this setting sends for `problem`."""
        return build_messages(problem.problem, system=self.system, template=self.template)

    def prompt_bytes(self, problem: Problem) -> int:
        """UTF-8 size of every message's content, system prompt included: what the cost estimate counts."""
        return sum(len(message["content"].encode()) for message in self.messages(problem))

    @property
    def fingerprint(self) -> str:
        return hashlib.sha256(_canonical(asdict(self)).encode()).hexdigest()[:16]

    @property
    def folder_name(self) -> str:
        if self.backend == "sim":  # named for what made it, never for the real model it stands in for
            return f"simulated-{self.fingerprint[:12]}"
        slug = re.sub(r"[^A-Za-z0-9._-]+", "-", self.model).strip("-") or "model"
        return f"{slug}-{self.fingerprint[:12]}"


def _canonical(obj: Any) -> str:
    return orjson.dumps(obj, option=orjson.OPT_SORT_KEYS).decode()


def prompt_digest(problem: Problem, setting: Setting) -> str:
    return hashlib.sha256(orjson.dumps(setting.messages(problem))).hexdigest()


class Pool:
    """A pool folder. Reading never needs a lock; writing one problem's log takes an exclusive one."""

    def __init__(self, root: Path) -> None:
        meta_path = root / "pool.json"
        if not meta_path.is_file():
            raise DataError(f"{root}: not a pool (no pool.json)")
        self.root = root
        self.meta: dict[str, Any] = orjson.loads(meta_path.read_bytes())
        if self.meta.get("format") != POOL_FORMAT:
            raise DataError(f"{meta_path}: unknown pool format {self.meta.get('format')!r}")

    @classmethod
    def open_or_create(cls, dataset_dir: Path, setting: Setting, *, simulated: bool) -> Pool:
        root = dataset_dir / setting.folder_name
        if not (root / "pool.json").is_file():
            write_json(root / "problems.json", {})
            write_json(root / "pool.json", {"format": POOL_FORMAT, "fingerprint": setting.fingerprint,
                                            "setting": asdict(setting), "simulated": simulated})
        pool = cls(root)
        if pool.meta["fingerprint"] != setting.fingerprint:
            raise DataError(f"{root}/pool.json: fingerprint {pool.meta['fingerprint']} does not match "
                            f"the setting's {setting.fingerprint}")
        if simulated and not pool.simulated:
            pool.mark_simulated()
        return pool

    @property
    def simulated(self) -> bool:
        return bool(self.meta.get("simulated"))

    def mark_simulated(self) -> None:
        self.meta = {**self.meta, "simulated": True}
        write_json(self.root / "pool.json", self.meta)

    def log_path(self, problem_id: str) -> Path:
        return self.root / SAMPLES_DIR / f"{problem_id}{LOG_SUFFIX}"

    def register(self, problems: Iterable[Problem]) -> None:
        """Record each problem's prompt digest; a changed prompt under a known id is an error."""
        setting = Setting(**self.meta["setting"])
        known: dict[str, str] = orjson.loads((self.root / "problems.json").read_bytes())
        changed = dict(known)
        for problem in problems:
            digest = prompt_digest(problem, setting)
            if known.get(problem.id, digest) != digest:
                raise DataError(f"problem {problem.id}: its prompt differs from the one pooled in {self.root}; "
                                f"give the changed problem a new id, or use a new dataset.name")
            changed[problem.id] = digest
        if changed != known:
            write_json(self.root / "problems.json", changed)

    def problem_ids(self) -> list[str]:
        return sorted(orjson.loads((self.root / "problems.json").read_bytes()))

    def stored_ids(self, problem_id: str) -> set[int]:
        frames, _ = framing.scan(self.log_path(problem_id), with_payload=False)
        return {frame.sample_id for frame in frames}

    def missing(self, problem_ids: Iterable[str], n_pool: int) -> dict[str, list[int]]:
        """Sample ids below n_pool not yet stored, per problem (problems with none missing left out)."""
        result = {}
        for problem_id in problem_ids:
            stored = self.stored_ids(problem_id)
            todo = [i for i in range(n_pool) if i not in stored]
            if todo:
                result[problem_id] = todo
        return result

    def writer(self, problem_id: str) -> framing.FrameWriter:
        return framing.FrameWriter(self.log_path(problem_id))

    def iter_samples(self, problem_id: str) -> Iterator[Sample]:
        for _, payload in framing.iter_payloads(self.log_path(problem_id)):
            yield codec.to_sample(codec.decode(payload))

    def read_problem(self, problem_id: str, n_pool: int) -> ProblemTraces:
        """Samples 0..n_pool-1 of one problem in columnar form, sorted by sample id.

        Reads the log once and decompresses only each sample's C_i block (codec.score_fields); the
        frame crc of every sample but the last is skipped, the blocks read carry their own.
        """
        path = self.log_path(problem_id)
        fields = [codec.score_fields(payload)
                  for sample_id, payload in framing.iter_payloads(path, check_every_crc=False) if sample_id < n_pool]
        fields.sort(key=lambda f: f.sample_id)
        offsets = np.zeros(len(fields) + 1, dtype=np.int64)
        np.cumsum([len(f.confidence) for f in fields], out=offsets[1:])
        confidence = np.empty(offsets[-1], dtype=np.float64)
        for start, end, f in zip(offsets[:-1].tolist(), offsets[1:].tolist(), fields, strict=True):
            confidence[start:end] = f.confidence  # the one copy: float32 -> the flat float64 array
        return ProblemTraces(
            problem_id=problem_id,
            sample_ids=np.array([f.sample_id for f in fields], dtype=np.int64),
            candidates=[f.candidates for f in fields],
            finish_reasons=[f.finish_reason for f in fields],
            offsets=offsets,
            token_confidence=confidence,
        )


def find_pool(dataset_dir: Path, setting: Setting) -> Pool | None:
    root = dataset_dir / setting.folder_name
    return Pool(root) if (root / "pool.json").is_file() else None


@dataclass(frozen=True)
class Manifest:
    """build_pool's small git-tracked summary: which pool the later stages read, and how much of it."""

    dataset: str
    pool: str  # the pool folder, relative to the manifest's folder
    fingerprint: str
    n_pool: int
    problems: int
    samples: int
    simulated: bool
    setting: dict[str, Any]

    def pool_root(self, manifest_path: Path) -> Path:
        return manifest_path.parent / self.pool


def write_manifest(path: Path, pool: Pool, dataset: str, n_pool: int, problem_ids: list[str]) -> Manifest:
    samples = sum(len([i for i in pool.stored_ids(pid) if i < n_pool]) for pid in problem_ids)
    manifest = Manifest(dataset=dataset, pool=str(pool.root.relative_to(path.parent)),
                        fingerprint=pool.meta["fingerprint"], n_pool=n_pool, problems=len(problem_ids),
                        samples=samples, simulated=pool.simulated, setting=pool.meta["setting"])
    write_json(path, asdict(manifest))
    return manifest


def read_manifest(path: Path) -> Manifest:
    if not path.is_file():
        raise DataError(f"{path}: pool manifest not found (run `make repro`, which pulls or builds the pool)")
    try:
        return Manifest(**orjson.loads(path.read_bytes()))
    except (orjson.JSONDecodeError, TypeError) as exc:
        raise DataError(f"{path}: not a pool manifest ({exc})") from exc
