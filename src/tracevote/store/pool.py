"""Trace pools: the ledger of sampled traces, one folder per (dataset, setting), one log per problem.

    pools/<dataset>/<model>-<fingerprint>/pool.json          the setting, and whether it is simulated
    pools/<dataset>/<model>-<fingerprint>/problems.json      problem id -> sha256 of its prompt
    pools/<dataset>/<model>-<fingerprint>/samples/<id>.tvf   the samples (see framing, codec)

The setting (model, prompt, decoding) decides the folder, so changing any of it starts a new pool
beside the old one, and switching back finds the old one complete. `pool.n_pool` is not part of
the setting: raising it tops the same pool up. A pool is a ledger (tracevote.store.ledger) under the
file names it had before the ledger generalised it, so every pool built before still reads.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Collection, Iterable, Iterator, Mapping
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np
import orjson

from tracevote.core.config import Params
from tracevote.core.config_endpoints import ModelConfig
from tracevote.core.errors import DataError
from tracevote.core.fileio import read_json_record, write_json
from tracevote.core.names import inside, recorded_path
from tracevote.core.study_paths import pool_stage
from tracevote.store import codec, confidence_block, frame_writer, framing
from tracevote.store.calls import Call
from tracevote.store.ledger import Ledger, canonical_json, fingerprint_of, folder_name
from tracevote.store.records import ProblemTraces, Sample

POOL_FORMAT = 1
SAMPLES_DIR = "samples"


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
    seed: int | None = None  # decoding.seed; left out of the fingerprint when None, so older pools keep their folder
    reasoning_effort: str | None = None  # the endpoint's; left out when None, as seed is

    @classmethod
    def from_params(cls, params: Params, model: ModelConfig | None = None) -> Setting:
        """The pool setting of DeepConf's `model` (default: deepconf.endpoint's)."""
        model, decoding = model or params.deepconf_model, params.decoding
        sim = canonical_json(asdict(model.sim)) if model.backend == "sim" else None
        return cls(backend=model.backend, model=model.name, extra_body=canonical_json(model.extra_body), sim=sim,
                   system=params.prompt.system, template=params.prompt.template,
                   temperature=decoding.temperature, top_p=decoding.top_p, max_tokens=decoding.max_tokens,
                   top_logprobs=decoding.top_logprobs, seed=decoding.seed, reasoning_effort=model.reasoning_effort)

    def record(self) -> dict[str, Any]:
        """The fields pool.json keeps and the fingerprint hashes: seed and reasoning_effort only when set, as pools
        before them had neither."""
        return {key: value for key, value in asdict(self).items()
                if value is not None or key not in ("seed", "reasoning_effort")}

    @property
    def fingerprint(self) -> str:
        return fingerprint_of(self.record())

    @property
    def folder_name(self) -> str:
        return folder_name(self.model, self.fingerprint, simulated=self.backend == "sim")


def prompt_digest(messages: list[dict[str, str]]) -> str:
    return hashlib.sha256(orjson.dumps(messages)).hexdigest()


class Pool(Ledger):
    """A trace ledger: its items are problems, its call keys sample ids, its records Samples (codec)."""

    META = "pool.json"
    ITEMS = "problems.json"
    LOGS = SAMPLES_DIR
    FORMAT = POOL_FORMAT

    @classmethod
    def file_folders(cls) -> tuple[tuple[str, str], ...]:
        """Its logs, and its confidence blocks."""
        return (*super().file_folders(), (confidence_block.FOLDER, confidence_block.SUFFIX))

    @classmethod
    def open_or_create(cls, dataset_dir: Path, setting: Setting, *, simulated: bool) -> Pool:
        return cls.open_at(dataset_dir / setting.folder_name, setting.record(), simulated=simulated)

    def register(self, prompts: Mapping[str, list[dict[str, str]]]) -> None:
        """Record the digest of each problem's prompt (its messages, by problem id, from the caller, which knows
        how the setting turns a problem into messages); a changed prompt under a known id is an error."""
        self.register_digests({problem_id: prompt_digest(messages) for problem_id, messages in prompts.items()},
                              what="prompt")

    @property
    def setting(self) -> Setting:
        return Setting(**self.meta["setting"])

    def problem_ids(self) -> list[str]:
        return self.item_ids()

    def stored_ids(self, problem_id: str) -> set[int]:
        return {int(key) for key in self.stored_keys(problem_id)}

    def missing_samples(self, problem_ids: Iterable[str], n_pool: int) -> dict[str, list[int]]:
        """Sample ids below n_pool not yet stored, per problem (problems with none missing left out)."""
        missing = self.missing({problem_id: range(n_pool) for problem_id in problem_ids})
        return {problem_id: [int(key) for key in keys] for problem_id, keys in missing.items()}

    def load(self, call: Call) -> Sample:
        """A stored sample, for a replay (problems.json already holds the digest of its prompt)."""
        path = self.log_path(call.item_id)
        for frame in framing.iter_frames(path):
            if frame.key == call.key:
                return _sample(path, frame)
        raise DataError(f"{path}: sample {call.key} is not stored")

    def iter_samples(self, problem_id: str, sample_ids: Collection[int] | None = None) -> Iterator[Sample]:
        """A problem's stored samples in sample-id order; only those of `sample_ids` when given, the others left
        undecoded (and their frames' crc unread: each decoded payload checks its own checksums)."""
        path = self.log_path(problem_id)
        frames = _in_key_order(path, check_every_crc=sample_ids is None)
        for frame in frames if sample_ids is None else (f for f in frames if f.key in sample_ids):
            yield _sample(path, frame)

    def frames_within(self, problem_id: str, n_pool: int, *, check_every_crc: bool = True) -> Iterator[framing.Frame]:
        """The frames of samples 0..n_pool-1 in sample-id order; each frame left out is checked to hold the sample
        its key names."""
        path = self.log_path(problem_id)
        for frame in _in_key_order(path, check_every_crc=check_every_crc):
            if _within(path, frame, n_pool):
                yield frame

    def read_problem(self, problem_id: str, n_pool: int) -> ProblemTraces:
        """Samples 0..n_pool-1 of one problem in columnar form, sorted by sample id.

        From the problem's confidence block (one mapped read, tracevote.store.confidence_block) when it is in
        step with the log, else from the log frame by frame (`read_frames`): the same traces either way.
        """
        block = confidence_block.read_block(self.block_path(problem_id), self.log_path(problem_id), problem_id, n_pool)
        return block if block is not None else self.read_frames(problem_id, n_pool)

    def read_frames(self, problem_id: str, n_pool: int | None = None, *,
                    check_every_crc: bool = False) -> ProblemTraces:
        """`read_problem` from the log (every sample when n_pool is None).

        Reads the log once and decompresses only each sample's C_i block (codec.score_fields); unless
        `check_every_crc`, the frame crc of every sample but the last is skipped, the blocks read carry their own.
        """
        path = self.log_path(problem_id)
        frames = (framing.iter_frames(path, check_every_crc=check_every_crc) if n_pool is None
                  else self.frames_within(problem_id, n_pool, check_every_crc=check_every_crc))
        return _traces(problem_id, path, frames)

    def block_path(self, problem_id: str) -> Path:
        """The problem's confidence block: its id made a file name by the one safe-name function."""
        return inside(self.root / confidence_block.FOLDER, problem_id, confidence_block.SUFFIX)

    def write_confidence_blocks(self, problem_ids: Iterable[str]) -> int:
        """Write the confidence block of each problem whose log has none in step with it; returns how many.

        Under the log's writer lock (DataError while a run writes it), every frame's crc checked."""
        written = 0
        for problem_id in problem_ids:
            log, block = self.log_path(problem_id), self.block_path(problem_id)
            if not log.exists() or confidence_block.read_block(block, log, problem_id, 0) is not None:
                continue
            fd = frame_writer.lock_log(log, read_only=True)  # the block is written beside the log, not into it
            try:
                state = framing.survey(log, check_every_crc=True)  # one walk: the stamp and the traces
                stamp = confidence_block.stamp_of(state)
                if stamp is not None:  # so the log is whole: its frames are what read_frames would read
                    traces = _traces(problem_id, log, framing.first_copies(state.frames))
                    confidence_block.write_block(block, traces, stamp)
                    written += 1
            finally:
                os.close(fd)
        return written


def _traces(problem_id: str, path: Path, frames: Iterable[framing.Frame]) -> ProblemTraces:
    """The score fields of `frames` (of the log at `path`) in columnar form, sorted by sample id."""
    fields = [_score_fields(path, frame) for frame in frames]
    fields.sort(key=lambda f: f.sample_id)
    offsets = np.zeros(len(fields) + 1, dtype=np.int64)
    np.cumsum([len(f.confidence) for f in fields], out=offsets[1:])
    # C_i stays float32 as stored (format 2; trace_measures sums in float64): half the bytes to copy and read
    confidence = np.empty(offsets[-1], dtype=np.result_type(np.float32, *(f.confidence.dtype for f in fields)))
    for start, end, f in zip(offsets[:-1].tolist(), offsets[1:].tolist(), fields, strict=True):
        confidence[start:end] = f.confidence  # the one copy, into the flat array
    return ProblemTraces(
        problem_id=problem_id,
        sample_ids=np.array([f.sample_id for f in fields], dtype=np.int64),
        candidates=[f.candidates for f in fields],
        finish_reasons=[f.finish_reason for f in fields],
        offsets=offsets,
        token_confidence=confidence,
    )


def _score_fields(path: Path, frame: framing.Frame) -> codec.ScoreFields:
    """The frame's score fields; a block failing its own checksum is damage (the frame crc was not read)."""
    try:
        fields = codec.score_fields(frame.payload)  # type: ignore[arg-type]
    except ValueError as exc:
        raise framing.damaged(path, frame.offset, f"sample {frame.key}: {exc}") from None
    _check_key(path, frame, fields.sample_id)
    return fields


def _within(path: Path, frame: framing.Frame, n_pool: int) -> bool:
    """Whether a frame is one of samples 0..n_pool-1; a frame left out is still checked to hold the sample its key
    names (only the payload's header is read), so a flipped key never hides a sample."""
    if int(frame.key) < n_pool:
        return True
    try:
        sample_id = codec.sample_id_of(frame.payload)  # type: ignore[arg-type]
    except ValueError as exc:
        raise framing.damaged(path, frame.offset, f"sample {frame.key}: {exc}") from None
    if sample_id is not None:
        _check_key(path, frame, sample_id)
    return False


def _sample(path: Path, frame: framing.Frame) -> Sample:
    sample = codec.to_sample(codec.decode(frame.payload))  # type: ignore[arg-type]
    _check_key(path, frame, sample.sample_id)
    return sample


def _in_key_order(path: Path, *, check_every_crc: bool) -> list[framing.Frame]:
    """A log's frames sorted by sample id: the log holds them in the order their calls finished, which concurrency
    and load vary, and nothing made of a pool may follow that order (the frames are views of the mapped log)."""
    return sorted(framing.iter_frames(path, check_every_crc=check_every_crc), key=lambda frame: frame.key)


def _check_key(path: Path, frame: framing.Frame, sample_id: int) -> None:
    """A sample frame's key lies outside its crc (in the header): the payload's own sample id must agree."""
    if sample_id != frame.key:
        raise framing.damaged(path, frame.offset, f"the frame's key says sample {frame.key}, its payload "
                                                  f"sample {sample_id}")


def find_pool(dataset_dir: Path, setting: Setting) -> Pool | None:
    root = dataset_dir / setting.folder_name
    return Pool(root) if (root / Pool.META).is_file() else None


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
    # sha256 of the problems' ids and prompt digests, so the manifest (what fetch of a dataset made of this pool's
    # traces depends on) changes when the problems do, even to as many others; None in manifests written before it
    problems_digest: str | None = None

    def pool_root(self, manifest_path: Path) -> Path:
        return recorded_path(manifest_path.parent, self.pool, source=manifest_path)


def write_manifest(path: Path, pool: Pool, dataset: str, n_pool: int, problem_ids: list[str]) -> Manifest:
    samples = sum(len([i for i in pool.stored_ids(pid) if i < n_pool]) for pid in problem_ids)
    digests = orjson.loads((pool.root / pool.ITEMS).read_bytes())
    problems = canonical_json({pid: digests.get(pid) for pid in problem_ids})
    problems_digest = hashlib.sha256(problems.encode()).hexdigest()
    manifest = Manifest(dataset=dataset, pool=str(pool.root.relative_to(path.parent)),
                        fingerprint=pool.meta["fingerprint"], n_pool=n_pool, problems=len(problem_ids),
                        samples=samples, simulated=pool.simulated, setting=pool.meta["setting"],
                        problems_digest=problems_digest)
    write_json(path, asdict(manifest))
    return manifest


def pool_texts(manifest_path: Path, problem_ids: Iterable[str] | None = None
               ) -> tuple[Manifest, dict[str, list[codec.TextFields]]]:
    """The manifest and, per problem (`problem_ids`, or each the pool holds traces of), the text fields of samples
    0..n_pool-1 of the pool it names, in sample-id order (frames_within's). A problem the pool lacks is a DataError
    naming the stage that builds it."""
    manifest = read_manifest(manifest_path)
    pool = Pool(manifest.pool_root(manifest_path))
    texts: dict[str, list[codec.TextFields]] = {}
    if problem_ids is None:
        problem_ids = [problem_id for problem_id in pool.problem_ids() if pool.log_path(problem_id).is_file()]
    for problem_id in problem_ids:
        log = pool.log_path(problem_id)  # checked once a problem, not once a frame (it resolves every folder)
        if not log.is_file():
            raise DataError(f"{manifest_path}: the pool {pool.root} holds no trace of problem {problem_id!r}; run "
                            f"`dvc repro {pool_stage(manifest_path, manifest.dataset)}`")
        texts[problem_id] = []
        for frame in pool.frames_within(problem_id, manifest.n_pool):
            fields = codec.text_fields(frame.payload)  # type: ignore[arg-type]
            _check_key(log, frame, fields.sample_id)
            texts[problem_id].append(fields)
    return manifest, texts


def prompt_tokens(manifest_path: Path, problem_ids: Iterable[str]) -> dict[str, int]:
    """Per problem, the prompt tokens its first stored sample was billed for: every trace of a problem is sent the
    same prompt, so one header says what each costs in input (the study's dollars). A problem the pool lacks is a
    DataError naming the stage that builds it."""
    manifest = read_manifest(manifest_path)
    pool = Pool(manifest.pool_root(manifest_path))
    tokens = {}
    for problem_id in problem_ids:
        frame = next(pool.frames_within(problem_id, manifest.n_pool, check_every_crc=False), None) \
            if pool.log_path(problem_id).is_file() else None
        if frame is None:
            raise DataError(f"{manifest_path}: the pool {pool.root} holds no trace of problem {problem_id!r}; run "
                            f"`dvc repro build_pool@{manifest.dataset}`")
        try:
            tokens[problem_id] = codec.usage_of(frame.payload).prompt_tokens  # type: ignore[arg-type]
        except ValueError as exc:
            raise framing.damaged(pool.log_path(problem_id), frame.offset, f"sample {frame.key}: {exc}") from None
    return tokens


def read_manifest(path: Path) -> Manifest:
    return read_json_record(path, Manifest, what="pool manifest",
                            missing="run `make repro`, which pulls or builds the pool")
