"""The paper's own setting as docs/endpoints.md documents it (issue 43 item 5): gpt-oss-120b on vLLM at reasoning
effort high with the official 130,000-token budget. Its params snippet is checked by tests/test_docs.py like every
other; here `python -m tracevote estimate` runs on it, in a project of the shared AIME 2025 file, and prints the
pool's and the endpoint's lines exactly as the page shows them; and a request of that endpoint carries the effort."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import yaml

from tests.conftest import REPO_ROOT, committed_params_text, hang_guard_s
from tests.docsnippets import Snippet, snippets
from tests.dvcproject import project_env, run_stage
from tracevote.cli.demo import deep_merge, local_dataset, write_params
from tracevote.core.config import load_params
from tracevote.sampling.client import ChatClient

PAGE = REPO_ROOT / "docs" / "endpoints.md"


def documented() -> tuple[dict[str, Any], Snippet]:
    """The page's gpt-oss params snippet, and the estimate lines shown after it."""
    found = snippets(PAGE)
    [index] = [i for i, snippet in enumerate(found) if snippet.lang == "yaml" and "gpt-oss-120b" in snippet.text]
    shown = next(snippet for snippet in found[index + 1:] if snippet.lang == "" and "build_pool@" in snippet.text)
    return yaml.safe_load(found[index].text), shown


def test_the_documented_endpoint_sends_the_paper_setting(tmp_path: Path) -> None:
    fragment, _ = documented()
    path = tmp_path / "params.yaml"
    write_params(path, deep_merge(yaml.safe_load(committed_params_text()), fragment))
    params = load_params(path)
    model = params.deepconf_model
    body = ChatClient(model, params.decoding, api_key=None, timeout_s=30, max_retries=0).request_body(
        [{"role": "user", "content": "P"}], sample_key="aime-00/0")
    assert (model.profile.name, model.name) == ("local", "openai/gpt-oss-120b")
    assert {key: body[key] for key in ("temperature", "max_tokens", "top_logprobs", "top_p", "reasoning_effort",
                                       "top_k")} == {"temperature": 1.0, "max_tokens": 130_000, "top_logprobs": 20,
                                                     "top_p": 1.0, "reasoning_effort": "high", "top_k": 40}
    assert params.pool.n_pool == 512


def test_estimate_prices_the_paper_scale_pool_as_the_page_shows(tmp_path: Path, shared_data: Path) -> None:
    fragment, shown = documented()
    params = deep_merge(yaml.safe_load(committed_params_text()), fragment)
    # the shared file of the hub's dataset: its problems under `question`
    params["datasets"]["aime_2025"] = {**params["datasets"]["aime_2025"],
                                       **local_dataset(shared_data / "aime_2025.jsonl", problem_key="question")}
    write_params(tmp_path / "params.yaml", params)
    run_stage(tmp_path, "fetch.py", "--dataset", "aime_2025", "--out", "data/raw/aime_2025.jsonl")
    run_stage(tmp_path, "normalize.py", "--dataset", "aime_2025", "--raw", "data/raw/aime_2025.jsonl", "--out",
              "data/aime_2025.jsonl")
    printed = subprocess.run([sys.executable, "-m", "tracevote", "estimate"], cwd=tmp_path, env=project_env(),
                             capture_output=True, text=True, timeout=hang_guard_s(), check=True).stdout.splitlines()
    for line in shown.text.splitlines():
        assert line in printed, f"docs/endpoints.md:{shown.line} shows {line!r}; estimate printed:\n" + "\n".join(
            printed)
