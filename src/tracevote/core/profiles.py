"""Provider profiles: what each kind of server accepts, so requests are shaped for it and refused before sending.

    infer_profile("https://api.openai.com/v1", "gpt-5-nano")    -> "openai-reasoning"
    infer_profile("http://127.0.0.1:4000/v1", "gpt-4o-mini")    -> "openai-chat" (a gateway to OpenAI)
    infer_profile("https://api.deepseek.com", "deepseek-v4-flash") -> "deepseek"
    infer_profile("http://gpu1:8000/v1", "Qwen/Qwen3-8B")       -> "local"

A model name only OpenAI serves decides wherever it is reached (a proxy, a company gateway, Azure); the host
decides only for names it does not know.

A profile decides whether `n` (several choices sharing one prefill) is sent, the token-limit field, which sampling
parameters may be sent, whether logprobs exist (and how many top entries), whether hidden reasoning tokens are
reported (they are billed as output: OpenAI counts them in completion_tokens), the structured-output form, and which
request fields are known (OpenAI answers an unknown one, such as DeepSeek's `thinking`, with HTTP 400). The
simulated server enforces the same rules (tracevote.sim.request), so the tests prove each method's requests for each
profile.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal
from urllib.parse import urlsplit

from tracevote.core.hosts import serves

ProfileName = Literal["deepseek", "openai-chat", "openai-reasoning", "local", "llama-cpp-python"]
StructuredOutput = Literal["json_schema", "json_object", "none"]

# The request fields OpenAI's chat completions API documents (2026); anything else is "Unrecognized request
# argument supplied". DeepSeek adds `thinking`; vLLM, SGLang and llama.cpp accept and ignore unknown fields.
OPENAI_FIELDS = frozenset({
    "model", "messages", "temperature", "top_p", "n", "stream", "stream_options", "stop", "max_tokens",
    "max_completion_tokens", "presence_penalty", "frequency_penalty", "logit_bias", "logprobs", "top_logprobs",
    "user", "seed", "response_format", "tools", "tool_choice", "parallel_tool_calls", "reasoning_effort",
    "service_tier", "store", "metadata", "modalities", "prediction", "audio", "verbosity",
    "prompt_cache_key", "safety_identifier", "web_search_options"})
DEEPSEEK_FIELDS = OPENAI_FIELDS | {"thinking"}


@dataclass(frozen=True)
class Profile:
    name: ProfileName
    token_limit_field: Literal["max_tokens", "max_completion_tokens"]
    sampling_parameters: bool  # False: only the default temperature (1) and no top_p are accepted
    max_top_logprobs: int | None  # None: no logprobs at all
    reasoning_tokens: bool  # usage reports hidden reasoning tokens, billed as output
    structured_output: StructuredOutput
    known_fields: frozenset[str] | None  # None: unknown fields are ignored, not refused
    # `n` choices in one reply sharing one prefill (vLLM, SGLang, OpenAI); False: never sent (DeepSeek's API does not
    # document it, llama.cpp's server answers one choice whatever n says)
    honours_n: bool = True

    @property
    def logprobs(self) -> bool:
        return self.max_top_logprobs is not None

    def describe(self) -> str:
        """"openai-reasoning (max_completion_tokens, default temperature only, no logprobs, hidden reasoning
        tokens billed as output, json_schema replies)"."""
        parts = [self.token_limit_field,
                 "any temperature and top_p" if self.sampling_parameters else "default temperature only",
                 f"logprobs with up to {self.max_top_logprobs} top entries" if self.logprobs else "no logprobs"]
        if self.reasoning_tokens:
            parts.append("hidden reasoning tokens billed as output")
        parts.append(f"{self.structured_output} replies" if self.structured_output != "none"
                     else "no structured replies")
        return f"{self.name} ({', '.join(parts)})"


PROFILES: dict[str, Profile] = {
    # DeepSeek's API: OpenAI's shape plus `thinking`; json_object replies (no json_schema); top_logprobs <= 20
    "deepseek": Profile("deepseek", "max_tokens", True, 20, False, "json_object", DEEPSEEK_FIELDS,
                        honours_n=False),
    # gpt-4o, gpt-4o-mini, gpt-4.1: max_tokens (deprecated but accepted) and top_logprobs <= 20
    "openai-chat": Profile("openai-chat", "max_tokens", True, 20, False, "json_schema", OPENAI_FIELDS),
    # the GPT-5 family and the o-series
    "openai-reasoning": Profile("openai-reasoning", "max_completion_tokens", False, None, True, "json_schema",
                                OPENAI_FIELDS),
    # vLLM, SGLang, llama.cpp: OpenAI's shape, logprobs as configured, guided json_schema decoding
    "local": Profile("local", "max_tokens", True, 20, False, "json_schema", None),
    # llama-cpp-python's server (llama_cpp.server, 0.3.36): as local, but its response_format takes only text and
    # json_object (a json_schema one is refused, as HTTP 500), so structured critic replies are not asked of it
    "llama-cpp-python": Profile("llama-cpp-python", "max_tokens", True, 20, False, "json_object", None,
                                honours_n=False),
}
DEFAULT_TEMPERATURE = 1.0  # the only temperature a reasoning model accepts
# Names only OpenAI serves (a fine-tuned one starts "ft:"): the o-series and the GPT-5 family reason (gpt-5-chat
# is GPT-5's chat model); the GPT-4 family (gpt-4, gpt-4-turbo, gpt-4.1, gpt-4o, chatgpt-4o) and gpt-3.5 chat.
# subtle: open-weight names (gpt-oss-20b, o-mini-something) do not match: vLLM serves those.
_OPENAI_REASONING_NAME = re.compile(r"^(ft:)?(o\d+(-[\w.:-]+)?|gpt-5(\.\d+)?(-(?!chat)[\w.:-]+)?)$", re.IGNORECASE)
_OPENAI_CHAT_NAME = re.compile(r"^(ft:)?(gpt-4(\.\d+)?o?(-[\w.:-]+)?|chatgpt-4o[\w.:-]*|gpt-3\.5-turbo[\w.:-]*|"
                               r"gpt-5(\.\d+)?-chat[\w.:-]*)$", re.IGNORECASE)
_OPENAI_HOSTS = ("openai.com", "openai.azure.com")  # Azure OpenAI serves OpenAI's models in OpenAI's shape


def infer_profile(base_url: str, model_name: str) -> ProfileName:
    """The profile a model name only OpenAI serves implies, wherever it is reached; else the host's:
    api.deepseek.com -> deepseek, OpenAI's and Azure OpenAI's hosts -> openai-chat, any other host -> local."""
    return inferred_profile(base_url, model_name)[0]


def inferred_profile(base_url: str, model_name: str) -> tuple[ProfileName, str]:
    """infer_profile's answer and why, for the opening line: ("openai-reasoning", "by its model name")."""
    if _OPENAI_REASONING_NAME.match(model_name):
        return "openai-reasoning", "by its model name"
    if _OPENAI_CHAT_NAME.match(model_name):
        return "openai-chat", "by its model name"
    host = (urlsplit(base_url).hostname or "").lower()
    if serves(host, ("deepseek.com",)):
        return "deepseek", f"by its host {host}"
    if serves(host, _OPENAI_HOSTS):
        return "openai-chat", f"by its host {host}"
    return "local", f"by its host {host or base_url} (no known provider's)"
