"""The simulated server's context windows: a request too long for its model is refused as that provider refuses it.

The window is the server's `context_window` option, else the documented one of a model name the project knows
(core.context_windows), else none. Prompt tokens are counted as tracevote's own check counts them
(core.prompt_tokens: exact for OpenAI's tokenizers, a byte bound otherwise): the simulator's rule, so a request the
check lets through is never refused here, and one it would refuse is, when the check is skipped.

Each profile's refusal, HTTP 400 with the provider's own wording:
- openai-chat / openai-reasoning: code "context_length_exceeded", "...However, your messages resulted in N tokens"
  (prompt alone too long) or "...you requested N tokens (P in the messages, C in the completion)...".
- deepseek: the same wording, with DeepSeek's code "invalid_request_error".
- local (vLLM): "'max_tokens' or 'max_completion_tokens' is too large: C. This model's maximum context length is W
  tokens and your request has P input tokens (C > W - P)", type "BadRequestError", code 400.
- llama-cpp-python 0.3.36: only a prompt that fills the window is refused (a longer max_tokens is cut to fit,
  llama.py), "This model's maximum context length is W tokens. However, you requested P+C tokens (P in the
  messages, C in the completion)...", code "context_length_exceeded" (llama_cpp/server/errors.py).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from tracevote.core.context_windows import context_window
from tracevote.core.prompt_tokens import prompt_tokens

Refusal = tuple[int, dict[str, Any]]


def context_refusal(request: Mapping[str, Any], max_tokens: int, profile: str,
                    window_setting: int | None) -> Refusal | None:
    """The 400 `profile`'s server answers a request whose prompt + `max_tokens` exceeds its window; None if it fits."""
    model = str(request.get("model", ""))
    window = context_window(model, window_setting)
    if window is None:
        return None
    prompt = prompt_tokens(list(request.get("messages") or []), model).tokens
    if profile == "llama-cpp-python":
        return _llamacpp(window.tokens, prompt, max_tokens) if prompt >= window.tokens else None
    if prompt + max_tokens <= window.tokens:
        return None
    if profile == "local":
        return _vllm(window.tokens, prompt, max_tokens)
    code = "invalid_request_error" if profile == "deepseek" else "context_length_exceeded"
    param = None if profile == "deepseek" else "messages"
    return 400, _error(_openai_message(window.tokens, prompt, max_tokens), "invalid_request_error", param, code)


def _openai_message(window: int, prompt: int, completion: int) -> str:
    head = f"This model's maximum context length is {window} tokens. "
    if prompt > window:
        return head + f"However, your messages resulted in {prompt} tokens. Please reduce the length of the messages."
    return head + (f"However, you requested {prompt + completion} tokens ({prompt} in the messages, {completion} in "
                   f"the completion). Please reduce the length of the messages or completion.")


def _vllm(window: int, prompt: int, completion: int) -> Refusal:
    if prompt >= window:
        message = (f"This model's maximum context length is {window} tokens. However, your request has {prompt} "
                   f"input tokens. Please reduce the length of the input messages.")
    else:
        message = (f"'max_tokens' or 'max_completion_tokens' is too large: {completion}. This model's maximum "
                   f"context length is {window} tokens and your request has {prompt} input tokens ({completion} > "
                   f"{window} - {prompt}).")
    return 400, _error(message, "BadRequestError", None, 400)


def _llamacpp(window: int, prompt: int, completion: int) -> Refusal:
    message = (f"This model's maximum context length is {window} tokens. However, you requested {prompt + completion}"
               f" tokens ({prompt} in the messages, {completion} in the completion). Please reduce the length of the "
               f"messages or completion.")
    return 400, _error(message, "invalid_request_error", "messages", "context_length_exceeded")


def _error(message: str, kind: str, param: str | None, code: str | int) -> dict[str, Any]:
    return {"error": {"message": message, "type": kind, "param": param, "code": code}}
