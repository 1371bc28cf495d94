"""Train the tinymath model and write it as one GGUF file with its manifest: one command, seeded.

    nice -n 15 .venv/bin/python train/train_tinymath.py --seed 0 --out models/tinymath.gguf

Deterministic given --seed (one CPU thread pool, deterministic kernels, each step's batch drawn from a generator
seeded by (seed, step)); a stopped run resumes from the checkpoint in --work. Needs requirements-train.txt.
"""

from __future__ import annotations

import argparse
import functools
import hashlib
import json
import math
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F
from tinymath_gguf import write_gguf
from tinymath_model import Llama, Shape
from tinymath_vocab import END, INSTRUCTION, Vocab, build_vocab, chat_prompt, decode, encode, encode_words

from tracevote.answers.extract import extract_answer
from tracevote.datasets.tinymath import (
    DEFAULT,
    GENERATOR_VERSION,
    TRAIN_SEED_OFFSET,
    Problem,
    generate,
    training_problems,
)


@dataclass(frozen=True)
class Settings:
    seed: int
    steps: int
    batch: int
    learning_rate: float
    warmup: int
    train_problems: int
    eval_problems: int
    temperature: float


def prompt_ids(problem: str, vocab: Vocab) -> list[int]:
    """encode(chat_prompt(user_message(problem))), the problem's words encoded one by one (fast)."""
    start, end = _fixed(chat_prompt("|"), vocab), _fixed("\n\n" + INSTRUCTION, vocab)
    bar = vocab.ids["|"]
    split = start.index(bar)
    return start[:split] + encode_words(problem, vocab) + end + start[split + 1:]


@functools.lru_cache(maxsize=16)
def _fixed(text: str, vocab: Vocab) -> list[int]:
    return encode(text, vocab)


def answer_ids(problem: Problem, vocab: Vocab) -> list[int]:
    """encode(solution + END), line by line."""
    newline = _fixed("\n", vocab)
    ids: list[int] = []
    for step in problem.steps:
        ids += encode_words(step.text, vocab) + newline
    return ids + encode(f"\\boxed{{{problem.answer}}}{END}", vocab)


def encode_corpus(problems: list[Problem], vocab: Vocab, context: int) -> tuple[np.ndarray, np.ndarray]:
    """(tokens, loss mask): one row per problem, padded with END; the loss covers the answer and its END."""
    tokens = np.full((len(problems), context + 1), vocab.ids[END], dtype=np.int64)
    mask = np.zeros((len(problems), context + 1), dtype=bool)
    for row, problem in enumerate(problems):
        prompt = prompt_ids(problem.problem, vocab)
        answer = answer_ids(problem, vocab)
        ids = (prompt + answer)[: context + 1]
        tokens[row, : len(ids)] = ids
        mask[row, len(prompt): len(ids)] = True
    return tokens, mask


def learning_rate(settings: Settings, step: int) -> float:
    if step < settings.warmup:
        return settings.learning_rate * (step + 1) / settings.warmup
    progress = (step - settings.warmup) / max(1, settings.steps - settings.warmup)
    return settings.learning_rate * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * progress)))


def train_step(model: Llama, optimizer: torch.optim.Optimizer, tokens: torch.Tensor, mask: torch.Tensor) -> float:
    logits = model(tokens[:, :-1])
    targets = tokens[:, 1:].masked_fill(~mask[:, 1:], -100)
    loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1), ignore_index=-100)
    optimizer.zero_grad(set_to_none=True)
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    optimizer.step()
    return float(loss.detach())


@torch.no_grad()
def sample_answers(model: Llama, vocab: Vocab, problems: list[Problem], temperature: float, seed: int,
                   max_new: int = 72) -> list[str]:
    """One sampled solution per problem (temperature sampling, no top-k/top-p), for the training log."""
    generator = torch.Generator().manual_seed(seed)
    end = vocab.ids[END]
    rows = [prompt_ids(problem.problem, vocab) for problem in problems]
    done = [False] * len(rows)
    answers: list[list[int]] = [[] for _ in rows]
    for _ in range(max_new):
        width = max(len(row) for row in rows)
        if width >= model.shape.context or all(done):
            break
        batch = torch.tensor([row + [end] * (width - len(row)) for row in rows])
        logits = model(batch)[torch.arange(len(rows)), torch.tensor([len(row) - 1 for row in rows])]
        chosen = torch.multinomial(torch.softmax(logits / temperature, -1), 1, generator=generator)[:, 0]
        for index, token in enumerate(chosen.tolist()):
            if not done[index]:
                rows[index].append(token)
                answers[index].append(token)
                done[index] = token == end
    return [decode([t for t in answer if t != end], vocab) for answer in answers]


def accuracy(model: Llama, vocab: Vocab, problems: list[Problem], temperature: float, seed: int) -> float:
    model.eval()
    texts = sample_answers(model, vocab, problems, temperature, seed)
    model.train()
    right = [extract_answer(text) == problem.answer for text, problem in zip(texts, problems, strict=True)]
    return float(np.mean(right))


def save_checkpoint(path: Path, model: Llama, optimizer: torch.optim.Optimizer, step: int) -> None:
    partial = path.with_suffix(".partial")
    torch.save({"model": model.state_dict(), "optimizer": optimizer.state_dict(), "step": step}, partial)
    partial.replace(path)


def train(settings: Settings, work: Path, log: list[dict[str, float]]) -> tuple[Llama, Vocab]:
    torch.manual_seed(settings.seed)
    torch.use_deterministic_algorithms(True)
    vocab = build_vocab()
    shape = Shape(vocab_size=len(vocab.tokens))
    model = Llama(shape)
    optimizer = torch.optim.AdamW(model.parameters(), lr=settings.learning_rate, weight_decay=0.01,
                                  betas=(0.9, 0.98))
    checkpoint = work / "checkpoint.pt"
    start = 0
    if checkpoint.exists():
        state = torch.load(checkpoint)
        model.load_state_dict(state["model"])
        optimizer.load_state_dict(state["optimizer"])
        start = state["step"]
        print(f"resuming at step {start}", flush=True)
    corpus = training_problems(settings.seed, settings.train_problems)
    tokens, mask = encode_corpus(corpus, vocab, shape.context)
    probes = generate(settings.seed + 2 * TRAIN_SEED_OFFSET, settings.eval_problems, DEFAULT)
    began = time.monotonic()
    for step in range(start, settings.steps):
        rows = np.random.default_rng([settings.seed, step]).integers(0, len(corpus), settings.batch)
        length = int(mask[rows].nonzero()[1].max()) + 1
        for group in optimizer.param_groups:
            group["lr"] = learning_rate(settings, step)
        loss = train_step(model, optimizer, torch.from_numpy(tokens[rows, :length]),
                          torch.from_numpy(mask[rows, :length]))
        if (step + 1) % 100 == 0 or step + 1 == settings.steps:
            entry = {"step": step + 1, "loss": round(loss, 4), "seconds": round(time.monotonic() - began, 1)}
            if (step + 1) % 500 == 0 or step + 1 == settings.steps:
                entry["probe_accuracy"] = accuracy(model, vocab, probes, settings.temperature, settings.seed)
                save_checkpoint(checkpoint, model, optimizer, step + 1)
            log.append(entry)
            print(json.dumps(entry), flush=True)
    return model, vocab


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def parse(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--steps", type=int, default=1200)
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--learning-rate", type=float, default=3e-3)
    parser.add_argument("--train-problems", type=int, default=24000)
    parser.add_argument("--eval-problems", type=int, default=64)
    parser.add_argument("--out", type=Path, required=True, help="the GGUF file to write; its manifest beside it")
    parser.add_argument("--work", type=Path, default=None, help="checkpoint folder (default: <out>.work)")
    return parser.parse_args(argv)


def main(argv: list[str]) -> int:
    args = parse(argv)
    settings = Settings(args.seed, args.steps, args.batch, args.learning_rate, min(200, args.steps // 10 + 1),
                        args.train_problems, args.eval_problems, temperature=0.6)
    work = args.work or args.out.with_suffix(".work")
    work.mkdir(parents=True, exist_ok=True)
    torch.set_num_threads(1)  # subtle: two threads on a shared 2-core machine ran 8x slower (spin-waits)
    log: list[dict[str, float]] = []
    model, vocab = train(settings, work, log)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    write_gguf(model, vocab, args.out, name="tinymath")
    manifest = {
        "file": args.out.name, "sha256": sha256(args.out), "bytes": args.out.stat().st_size,
        "command": "nice -n 15 .venv/bin/python train/train_tinymath.py " + " ".join(argv),
        "seed": args.seed, "generator": GENERATOR_VERSION, "training": settings.__dict__,
        "shape": model.shape.as_dict(), "parameters": sum(p.numel() for p in model.parameters()),
        "tokenizer": f"llama (SentencePiece-style), {len(vocab.tokens)} tokens: train/tinymath_vocab.py",
        "torch": torch.__version__, "log": log,
    }
    args.out.with_suffix(".json").write_text(json.dumps(manifest, indent=2) + "\n")
    print(f"wrote {args.out} ({manifest['bytes']} bytes, sha256 {manifest['sha256']})")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
