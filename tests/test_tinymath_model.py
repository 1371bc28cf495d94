"""The shipped small model (models/tinymath.gguf): its hash matches its manifest, its held-out set is the
generator's, its tokenizer is llama.cpp's, and the training command writes a GGUF the engine loads.

The training test needs requirements-train.txt (torch, gguf); the engine checks need llama-cpp-python
(`llama_cpp`). Each skips, saying why, where its part is not installed.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import FIXTURE_PARAMS, REPO_ROOT, hang_guard_s
from tracevote.answers.extract import extract_answer
from tracevote.core.config import load_params
from tracevote.datasets.tinymath import GENERATOR_VERSION, generate, step_values
from tracevote.sampling.prompts import build_messages

MODEL = REPO_ROOT / "models" / "tinymath.gguf"
MANIFEST = REPO_ROOT / "models" / "tinymath.json"
HELDOUT = REPO_ROOT / "src" / "tracevote" / "datasets" / "data" / "tinymath_heldout.jsonl"
TRAIN = REPO_ROOT / "train"
sys.path.insert(0, str(TRAIN))  # the training folder is scripts, not a package

from tinymath_heldout import heldout_lines  # noqa: E402
from tinymath_vocab import build_vocab, chat_prompt, decode, encode, user_message  # noqa: E402


def _needs(*modules: str) -> None:
    missing = [name for name in modules if importlib.util.find_spec(name) is None]
    if missing:
        pytest.skip(f"{', '.join(missing)} not installed (training: requirements-train.txt; engine: "
                    "llama-cpp-python)")


def test_the_shipped_file_matches_its_manifest() -> None:
    if not MODEL.is_file():
        pytest.skip(f"{MODEL} is not committed yet")
    manifest = json.loads(MANIFEST.read_text())
    assert hashlib.sha256(MODEL.read_bytes()).hexdigest() == manifest["sha256"]
    assert MODEL.stat().st_size == manifest["bytes"] <= 20 * 1024 * 1024
    assert manifest["generator"] == GENERATOR_VERSION
    assert manifest["command"].startswith("nice -n 15 .venv/bin/python train/train_tinymath.py --seed ")
    heldout = manifest["heldout"]
    assert 0.3 <= heldout["accuracy"] <= 0.7 and heldout["temperature"] == 0.6
    assert heldout["right"] == round(heldout["accuracy"] * heldout["traces"])


def test_the_heldout_file_is_the_generators() -> None:
    assert HELDOUT.read_text() == heldout_lines()
    trained_on = {problem.problem for problem in generate(1_000_003, 24_000)}
    assert not trained_on & {json.loads(line)["problem"] for line in HELDOUT.read_text().splitlines()}


def test_the_prompt_trained_on_is_the_one_the_project_sends() -> None:
    params = load_params(FIXTURE_PARAMS).prompt
    messages = build_messages("Ana has 3 pens.", system=params.system, template=params.template)
    assert messages == [{"role": "user", "content": user_message("Ana has 3 pens.")}]


@pytest.mark.parametrize("text", [
    chat_prompt(user_message(generate(2, 1)[0].problem)) + generate(2, 1)[0].solution + "<|end|>",
    "Ben  has\t5 ünïcode 😀 (a word the vocabulary lacks: byte fallback)",
    "\\boxed{}. Please reason step by step",
])
def test_text_round_trips_through_the_tokenizer(text: str) -> None:
    vocab = build_vocab()
    assert decode(encode(text, vocab), vocab) == text.replace("<s>", "").replace("<|user|>", "").replace(
        "<|end|>", "").replace("<|assistant|>", "")


@pytest.mark.slow
def test_training_runs_a_few_steps_and_writes_a_gguf(tmp_path: Path) -> None:
    _needs("torch", "gguf")
    out, again = tmp_path / "tiny.gguf", tmp_path / "again" / "tiny.gguf"
    for path in (out, again):
        command = [sys.executable, str(TRAIN / "train_tinymath.py"), "--seed", "3", "--steps", "3", "--batch", "4",
                   "--train-problems", "16", "--eval-problems", "2", "--out", str(path)]
        done = subprocess.run(command, capture_output=True, text=True, timeout=hang_guard_s(), check=False)
        assert done.returncode == 0, done.stderr[-2000:]
    manifest = json.loads(out.with_suffix(".json").read_text())
    assert manifest["sha256"] == hashlib.sha256(out.read_bytes()).hexdigest()
    assert out.read_bytes() == again.read_bytes()  # deterministic given the seed
    assert [entry["step"] for entry in manifest["log"]] == [3]
    import gguf

    reader = gguf.GGUFReader(str(out))
    names = {tensor.name for tensor in reader.tensors}
    assert {"token_embd.weight", "output.weight", "blk.0.attn_q.weight", "blk.2.ffn_down.weight"} <= names
    _engine_agrees(out)


@pytest.mark.slow
def test_the_engine_loads_the_shipped_model_and_it_answers_in_the_trained_form() -> None:
    if not MODEL.is_file():
        pytest.skip(f"{MODEL} is not committed yet")
    model = _engine_agrees(MODEL)
    problem = generate(5, 1)[0]
    reply = model.create_chat_completion([{"role": "user", "content": user_message(problem.problem)}],
                                         temperature=0.0, max_tokens=128)
    text = reply["choices"][0]["message"]["content"]
    assert reply["choices"][0]["finish_reason"] == "stop"  # it ends with <|end|>, the end-of-sequence token
    assert text.split("\n")[0] == problem.steps[0].text and len(step_values(text)) == len(problem.steps) + 1
    assert extract_answer(text) is not None


def _engine_agrees(path: Path) -> Any:
    """llama.cpp loads the file, applies its chat template and tokenizes exactly as training did."""
    _needs("llama_cpp")
    from llama_cpp import Llama

    model = Llama(model_path=str(path), n_ctx=256, logits_all=True, verbose=False)  # as the server loads it
    vocab = build_vocab()
    for problem in generate(9, 20):
        text = chat_prompt(user_message(problem.problem)) + problem.solution
        assert model.tokenize(text.encode(), add_bos=False, special=True) == encode(text, vocab)
    reply = model.create_chat_completion([{"role": "user", "content": "Ana has 3 pens."}], max_tokens=2,
                                         logprobs=True, top_logprobs=3)
    assert reply["usage"]["prompt_tokens"] == len(encode(chat_prompt("Ana has 3 pens."), vocab))
    return model
