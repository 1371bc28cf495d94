"""What a server's refusal means: the error a response other than 200 raises, and the words that say what to do.

Retried (TransientError): 429, 408 and every 5xx, with the server's Retry-After. Not retried: a quota or billing
refusal (402, OpenAI's 429 insufficient_quota, DeepSeek's "Insufficient Balance") raises QuotaError, which stops
the client; a prompt longer than the context window ContextLengthError; an unknown model ModelNotFoundError; a 404
that does not mention the model EndpointNotFoundError (a wrong path); any other 4xx FatalAPIError, naming the
settings the request was made from and the profile that shaped it.
"""

from __future__ import annotations

import urllib.parse
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, NoReturn

import orjson
import requests

from tracevote.core.config_deepconf import DecodingConfig
from tracevote.core.config_endpoints import ModelConfig
from tracevote.core.errors import (
    ContextLengthError,
    EndpointNotFoundError,
    FatalAPIError,
    ModelNotFoundError,
    QuotaError,
)
from tracevote.core.retry import TransientError, parse_retry_after
from tracevote.core.simulated import SIMULATED_HEADER
from tracevote.sampling.endpoints import Endpoint

_RETRIED_STATUS = (408, 429)  # and every 5xx
_QUOTA_WORDS = ("insufficient balance", "insufficient_quota", "exceeded your current quota")
_BILLING_PAGES = {  # host suffix -> where its account is topped up
    "deepseek.com": "https://platform.deepseek.com/top_up",
    "openai.com": "https://platform.openai.com/settings/organization/billing",
}


@dataclass(frozen=True)
class Refusals:
    """The refusals of one client's requests: its model and settings name what to change."""

    model: ModelConfig
    decoding: DecodingConfig
    settings: str  # the params.yaml section `decoding` comes from
    redact: Callable[[str], str]  # the API key and URL credentials blanked

    def refuse(self, response: requests.Response, endpoint: Endpoint) -> NoReturn:
        """The error a response other than 200 raises: QuotaError, TransientError, or a FatalAPIError."""
        status = response.status_code
        doc = _error_document(response)
        detail, code = self.redact(_server_message(response, doc)), _error_code(doc)
        if _is_quota_error(status, code, detail):
            raise QuotaError(self._quota_message(endpoint, status, detail), status)
        if status in _RETRIED_STATUS or status >= 500:
            raise TransientError(f"HTTP {status}", detail, parse_retry_after(response.headers.get("Retry-After")))
        if _is_context_length(status, code, detail):
            raise ContextLengthError(f"{endpoint.chat_url} (model {self.model.name!r}): HTTP {status}, longer than the "
                                     f"model's context window: {detail}", status,
                                     simulated=response.headers.get(SIMULATED_HEADER) == "1")
        if code == "model_not_found" or _says_no_such_model(detail) or (
                status == 404 and self.model.name in detail):
            raise ModelNotFoundError(self._model_not_found_message(endpoint.chat_url, status, detail), status)
        if status == 404:
            raise EndpointNotFoundError(
                f"the endpoint {endpoint.chat_url} answered 404 ({detail}): check "
                f"endpoints.{self.model.endpoint}.base_url, now "
                f"{endpoint.base_url!r} (OpenAI-compatible servers usually serve /v1/chat/completions, so "
                f"base_url ends in /v1; {_PROVIDERS[self.model.profile.name].base_url_hint})", status)
        raise FatalAPIError(self._fatal_message(endpoint.chat_url, status, detail), status)

    def _model_not_found_message(self, url: str, status: int, detail: str) -> str:
        return (f"{url}: HTTP {status}, model {self.model.name!r} not found: {detail}. Check "
                f"endpoints.{self.model.endpoint}.name in params.yaml "
                f"({_PROVIDERS[self.model.profile.name].model_hint}).")

    def _quota_message(self, endpoint: Endpoint, status: int, detail: str) -> str:
        host = urllib.parse.urlsplit(endpoint.base_url).hostname or ""
        where = next((page for suffix, page in _BILLING_PAGES.items() if host.endswith(suffix)),
                     "the provider's billing page")
        return (f"{endpoint.chat_url} (model {self.model.name!r}): HTTP {status}, out of quota or balance: {detail}. "
                f"No retry brings quota back, so the run stopped at once (every reply received is stored). Top up "
                f"or raise the quota of the account whose key is in ${self.model.api_key_env} ({where}), then run "
                f"the stage again: it requests only what is missing.")

    def _fatal_message(self, url: str, status: int, detail: str) -> str:
        where = f"{url} (model {self.model.name!r})"
        if status == 401:
            return (f"{where}: HTTP 401, authentication failed: {detail}. Check the API key in "
                    f"${self.model.api_key_env} (environment or .env).")
        return (f"{where}: HTTP {status}, the server refused the request: {detail}. Check {self._settings_text()} "
                f"and endpoints.{self.model.endpoint} (extra_body {self.model.extra_body}, profile "
                f"{self.model.profile.name}{self._effort_text()}) in params.yaml.{self._profile_hint(detail)}")

    def _effort_text(self) -> str:
        effort = self.model.reasoning_effort
        return "" if effort is None else f", reasoning_effort {effort}"

    def _settings_text(self) -> str:
        """"grading.critic (temperature 0.0, max_tokens 4096)": the keys this method sets its requests with."""
        values = {"temperature": self.decoding.temperature, "max_tokens": self.decoding.max_tokens}
        if self.settings == "decoding":
            values |= {"top_p": self.decoding.top_p, "top_logprobs": self.decoding.top_logprobs}
        return f"{self.settings} ({', '.join(f'{key} {value}' for key, value in values.items())})"

    def _profile_hint(self, detail: str) -> str:
        """What `profile:` would change: the refusal may come from a profile that is not the server's provider's."""
        key, profile = f"endpoints.{self.model.endpoint}.profile", self.model.profile.name
        reasoning_words = ("max_completion_tokens", "max_tokens", "temperature", "top_p", "logprobs", "reasoning")
        if profile != "openai-reasoning" and any(word in detail.lower() for word in reasoning_words):
            fits = "openai-reasoning (OpenAI's GPT-5 and o-series: max_completion_tokens, the default temperature only)"
        else:
            fits = "the provider's: deepseek, openai-chat, openai-reasoning or local"
        how = (f"is {profile}, as {key} sets it" if self.model.profile_why in ("", "as set")
               else f"{profile} was inferred {self.model.profile_why}")
        return (f" The profile {how}; if the server is another provider's (OpenAI's behind a gateway, say), set "
                f"{key}: {fits}.")


@dataclass(frozen=True)
class _Provider:
    """What a refusal's hints say of the provider a profile stands for."""

    base_url_hint: str
    model_hint: str


_OPENAI = _Provider("OpenAI's is https://api.openai.com/v1",
                    "OpenAI lists its models at https://platform.openai.com/docs/models")
_PROVIDERS = {
    "deepseek": _Provider("DeepSeek's is https://api.deepseek.com",
                          "DeepSeek retired deepseek-chat in favour of deepseek-v4-flash"),
    "openai-chat": _OPENAI,
    "openai-reasoning": _OPENAI,
    "local": _Provider("vLLM and SGLang serve http://<host>:<port>/v1",
                       "vLLM serves the name given to --served-model-name, else the model's path"),
    "llama-cpp-python": _Provider("python -m llama_cpp.server serves http://<host>:<port>/v1",
                                  "it serves the name given to --model_alias, else the model's path"),
}


def _is_quota_error(status: int, code: str | None, message: str) -> bool:
    """A quota or billing refusal, which no retry mends: HTTP 402 (DeepSeek's "Insufficient Balance"), OpenAI's
    429 with code insufficient_quota ("You exceeded your current quota"), or those words under another status."""
    lowered = message.lower()
    return (status == 402 or code == "insufficient_quota"
            or any(words in lowered for words in _QUOTA_WORDS))


def _error_document(response: requests.Response) -> dict[str, Any]:
    try:
        doc = orjson.loads(response.content)
    except orjson.JSONDecodeError:
        return {}
    return doc if isinstance(doc, dict) else {}


def _error_code(doc: dict[str, Any]) -> str | None:
    """error.code of an OpenAI-style error body ("model_not_found"), else None."""
    error = doc.get("error")
    code = error.get("code") if isinstance(error, dict) else None
    return code if isinstance(code, str) else None


def _server_message(response: requests.Response, doc: dict[str, Any]) -> str:
    """The server's own words: error.message (OpenAI, DeepSeek) or message (vLLM) of its JSON error body `doc`;
    "an HTML page" for a proxy's or web server's page; else the start of the body."""
    error = doc.get("error")
    message = error.get("message") if isinstance(error, dict) else error or doc.get("message")
    if isinstance(message, str) and message:
        return message
    if "html" in response.headers.get("Content-Type", "").lower():
        return "an HTML page, not an API's JSON error"
    return " ".join(response.text[:300].split()) or "an empty body"


def _says_no_such_model(message: str) -> bool:
    """DeepSeek answers an unknown model with 400 "Model Not Exist"; vLLM with 404 "... does not exist"."""
    lowered = message.lower()
    return "model" in lowered and ("not exist" in lowered or "not found" in lowered)


def _is_context_length(status: int, code: object, detail: str) -> bool:
    """OpenAI's code context_length_exceeded (llama.cpp's server copies it); DeepSeek and vLLM say it in words."""
    return status == 400 and (code == "context_length_exceeded" or "maximum context length" in detail)
