"""params.yaml's `model:` (who answers: the endpoints' servers or the simulated model) and `endpoints:` (named
models on one or more servers of one provider, with their prices), and the endpoint as a method calls it."""

from __future__ import annotations

from dataclasses import asdict, dataclass, replace
from typing import Any, ClassVar, Literal
from urllib.parse import urlsplit

from tracevote.core.config_datasets import KEY_NAME, KEY_NAME_RULE
from tracevote.core.context_windows import ContextWindow, context_window
from tracevote.core.errors import ConfigError
from tracevote.core.hosts import forbidden_host, key_hosts, redact_urls, serves
from tracevote.core.limits import MAX_TOKENS_BOUND, check_extra_body, require_env_name
from tracevote.core.profiles import PROFILES, Profile, ProfileName, inferred_profile
from tracevote.core.typedconfig import param, require

Backend = Literal["openai", "sim"]
# OpenAI's documented values for the GPT-5 family (gpt-5.1's "none" and later models' "xhigh" are not offered);
# gpt-oss takes low, medium and high. null sends nothing: the model's default (medium for gpt-5 and gpt-oss).
ReasoningEffort = Literal["minimal", "low", "medium", "high"]
MAX_CONTEXT_WINDOW = 100_000_000  # no model's is near; a typo's extra digits are refused
BaseUrl = str | tuple[str, ...]  # one server, or several serving the same model (vLLM replicas)


def base_urls(base_url: BaseUrl) -> tuple[str, ...]:
    """Every server of a `base_url` setting, as a tuple."""
    return (base_url,) if isinstance(base_url, str) else base_url


@dataclass(frozen=True)
class SimConfig:
    """The simulated model, used when model.backend is sim (the demo, the tests, the benchmarks)."""

    seed: int = param("the simulated model's random seed")
    signal: float = param("how much confidence says about correctness: 0 nothing, larger more", ge=0)
    accuracy: float = param("the mean chance that one trace is right", ge=0, le=1)
    mean_tokens: int = param("the mean length of a simulated trace, in tokens", ge=8, le=MAX_TOKENS_BOUND)
    critique_noise: float = param("0: critiques find the first error as often as the step count allows; 1: almost "
                                  "never", 0.3, ge=0, le=1)


@dataclass(frozen=True)
class SimOverride:
    """`endpoints.<key>.sim`: a model of deepconf.endpoints simulated with model.sim's keys replaced by these, so two
    simulated models differ (`{accuracy: 0.3, mean_tokens: 900}`: a weaker, terser model)."""

    seed: int | None = param("the simulated model's random seed; null: model.sim's", None)
    signal: float | None = param("how much confidence says about correctness; null: model.sim's", None, ge=0)
    accuracy: float | None = param("the mean chance that one trace is right; null: model.sim's", None, ge=0, le=1)
    mean_tokens: int | None = param("the mean length of a simulated trace, in tokens; null: model.sim's", None,
                                    ge=8, le=MAX_TOKENS_BOUND)

    def applied_to(self, sim: SimConfig) -> SimConfig:
        """SimOverride(accuracy=0.3).applied_to(model.sim) -> model.sim with accuracy 0.3."""
        return replace(sim, **{key: value for key, value in asdict(self).items() if value is not None})


# subtle: the default of an entry without a sim: key, told apart from `sim: null` by identity (Params.validate asks
# every model of deepconf.endpoints for the key, which its dvc.yaml stages declare: DVC refuses a missing param)
NO_SIM_KEY = SimOverride()


@dataclass(frozen=True)
class BackendConfig:
    """`model:`: who answers every endpoint's calls. openai: the endpoints' own servers; sim: the built-in
    simulated model, on a loopback server enforcing each endpoint's provider profile."""

    backend: Backend = param("openai: every endpoint's own servers; sim: the built-in simulated model answers every "
                             "endpoint, enforcing its provider profile")
    sim: SimConfig = param("the simulated model")


@dataclass(frozen=True)
class PricingConfig:
    """An endpoint's list prices, in USD per million tokens."""

    checked: str = param("when the prices were last checked (YYYY-MM)")
    input_cache_miss: float = param("USD per 1M input tokens not in the provider's cache", ge=0)
    input_cache_hit: float = param("USD per 1M input tokens served from the provider's cache", ge=0)
    output: float = param("USD per 1M output tokens (hidden reasoning tokens included)", ge=0)
    expected_output_fraction: float = param("cost estimates take output as this fraction of max_tokens", 1.0,
                                            gt=0, le=1)


@dataclass(frozen=True)
class EndpointConfig:
    """One entry of `endpoints:`, named by its key: a model on one or more servers of one provider."""

    KEY_FIELD: ClassVar[str] = "key"  # `name` is the model's name
    key: str = param("the entry's key in endpoints:, which methods name")
    profile: ProfileName | None = param("the provider profile (token-limit field, sampling parameters, logprobs, "
                                        "reasoning tokens, structured replies); null: inferred from base_url and name")
    base_url: BaseUrl = param("the server's OpenAI-compatible base URL, or a list of servers of the same model")
    name: str = param("the model name sent in every request")
    extra_body: dict[str, Any] = param("extra request fields, sent as they are (DeepSeek's thinking, say)")
    api_key_env: str = param("the environment variable (or .env entry) holding the API key")
    needs_key: bool = param("false for a local vLLM / SGLang / llama.cpp server that needs no key (none is sent)")
    pricing: PricingConfig = param("list prices, USD per 1M tokens")
    context_window: int | None = param("the model's context window in tokens (prompt + max_tokens must fit); null: "
                                       "the documented window of a model name the project knows, else unchecked",
                                       None, ge=1, le=MAX_CONTEXT_WINDOW)
    allow_foreign_key: bool = param("true: send a provider's key (OPENAI_API_KEY, DEEPSEEK_API_KEY, ...) to a host "
                                    "that is not that provider's, such as a gateway that forwards to it", False)
    reasoning_effort: ReasoningEffort | None = param(
        "how much a reasoning model thinks before it answers (profile openai-reasoning, or local for gpt-oss on "
        "vLLM), sent as the request's reasoning_effort; its hidden reasoning is paid from the same token budget as "
        "the answer; null: none sent, the model's default", None)
    sim: SimOverride | None = param("a model of deepconf.endpoints only, and required there, whatever "
                                    "model.backend (its stages declare it): its simulated model when model.backend "
                                    "is sim, model.sim with these keys replaced; null: model.sim as it is",
                                    NO_SIM_KEY)

    def validate(self, where: str) -> None:
        require(bool(KEY_NAME.match(self.key)), where, "key", self.key, f"{KEY_NAME_RULE}; methods name it")
        has_servers = require_endpoint(where, self.name, self.base_url)
        check_extra_body(where, self.extra_body)
        require_env_name(where, self.api_key_env)
        if not has_servers:
            return  # the profile is inferred from the first server
        if self.needs_key and not self.allow_foreign_key:
            for key, url in server_keys(self.base_url):
                require_key_bound(where, key, url, self.api_key_env)
        profile = self.resolved_profile()
        unknown = sorted(set(self.extra_body) - profile.known_fields) if profile.known_fields is not None else []
        require(not unknown, where, "extra_body", unknown[0] if unknown else None,
                f"a field {profile.name} accepts ({profile.name} answers an unknown request field with HTTP 400; "
                f"'thinking' is DeepSeek's own)")
        require_effort(where, self.reasoning_effort, profile)

    def resolved_profile(self) -> Profile:
        return PROFILES[self.profile or inferred_profile(base_urls(self.base_url)[0], self.name)[0]]

    def profile_why(self) -> str:
        """Why the endpoint has its profile: "as set", "by its model name", "by its host api.deepseek.com"."""
        return "as set" if self.profile else inferred_profile(base_urls(self.base_url)[0], self.name)[1]


@dataclass(frozen=True)
class ModelConfig:
    """An endpoint as a method calls it: its servers, model, key, profile and prices, and who answers."""

    backend: Backend
    base_url: BaseUrl
    name: str
    extra_body: dict[str, Any]
    api_key_env: str
    needs_key: bool
    sim: SimConfig
    profile: Profile = PROFILES["deepseek"]
    pricing: PricingConfig | None = None  # None: not priced (a bare client in a test)
    context_window: int | None = None  # endpoints.<key>.context_window as set; None: the name's documented one
    endpoint: str = "deepseek"  # its key in `endpoints:`, for messages and reports (the default endpoint's)
    allow_foreign_key: bool = False  # a provider's key may go to a host not that provider's (a gateway)
    profile_why: str = ""  # "as set", "by its model name", "by its host ...": for the opening line and hints
    reasoning_effort: ReasoningEffort | None = None  # sent as the request's reasoning_effort; None: none sent

    def validate(self, where: str) -> None:
        require_endpoint(where, self.name, self.base_url)
        check_extra_body(where, self.extra_body)
        require_env_name(where, self.api_key_env)

    def priced(self) -> PricingConfig:
        if self.pricing is None:
            raise ConfigError(f"endpoint {self.endpoint}: no pricing")
        return self.pricing

    def window(self) -> ContextWindow | None:
        """The context window its prompts must fit, and why; None: unknown, so unchecked."""
        return context_window(self.name, self.context_window)

    def describe(self) -> str:
        """"gpt-4o-mini (endpoint gpt-4o-mini, profile openai-chat by its model name, simulated)"."""
        sim = ", simulated" if self.backend == "sim" else ""
        why = f" {self.profile_why}" if self.profile_why else ""
        return f"{self.name} (endpoint {self.endpoint}, profile {self.profile.name}{why}{sim})"


# The efforts each profile takes: OpenAI's reasoning models all four; a local server only gpt-oss's three (vLLM
# refuses "minimal"); the others (DeepSeek, OpenAI's chat models, llama-cpp-python) none.
PROFILE_EFFORTS: dict[str, tuple[str, ...]] = {"openai-reasoning": ("minimal", "low", "medium", "high"),
                                               "local": ("low", "medium", "high")}


def require_effort(where: str, effort: str | None, profile: Profile) -> None:
    """A reasoning effort only where the profile takes it, and one of the values it takes."""
    if effort is None:
        return
    takes = PROFILE_EFFORTS.get(profile.name, ())
    if not takes:
        require(False, where, "reasoning_effort", effort,
                f"null: profile {profile.name} takes no reasoning_effort (openai-reasoning does, and local for "
                f"gpt-oss on vLLM)")
        return
    require(effort in takes, where, "reasoning_effort", effort,
            f"one of {', '.join(takes)} (what profile {profile.name} takes), or null")


def with_effort(setting: dict[str, Any], model: ModelConfig, key: str = "reasoning_effort") -> dict[str, Any]:
    """A ledger's setting with the endpoint's reasoning effort in it when one is set (it shapes every reply); left
    out when null, so the ledgers made before the setting existed keep their names."""
    return setting if model.reasoning_effort is None else {**setting, key: model.reasoning_effort}


def server_keys(base_url: BaseUrl) -> list[tuple[str, str]]:
    """(its key in params.yaml, URL) for each server: base_url, or base_url[0], base_url[1], ..."""
    if isinstance(base_url, str):
        return [("base_url", base_url)]
    return [(f"base_url[{i}]", url) for i, url in enumerate(base_url)]


def require_endpoint(where: str, name: str, base_url: BaseUrl) -> bool:
    """A model name and one or more distinct http(s) base URLs, none link-local or a metadata service's; False
    when a server cannot be called at all."""
    require(bool(name), where, "name", name, "a model name")
    urls = base_urls(base_url)
    if not require(len(urls) > 0, where, "base_url", list(urls), "an http(s) URL or a non-empty list of them"):
        return False
    callable_urls = [require_server_url(where, key, url) for key, url in server_keys(base_url)]
    stripped = [url.rstrip("/") for url in urls]
    repeated = sorted({redact_urls(url) for url in stripped if stripped.count(url) > 1})
    require(not repeated, where, "base_url", repeated[0] if repeated else None, "listed only once")
    return all(callable_urls)


def url_host(url: str) -> str | None:
    """The hostname of an http(s) URL ("http://GPU1:8000/v1" -> "gpu1"); None for any other URL or none."""
    try:
        parts = urlsplit(url)
        host = parts.hostname
        parts.port  # noqa: B018 - subtle: a port that is not a number raises only when read
    except ValueError:
        return None
    return host if parts.scheme.lower() in ("http", "https") and host else None


def require_server_url(where: str, key: str, url: str) -> bool:
    """An http(s) URL with a host that is not link-local nor a cloud metadata service (the credentials it may
    hold are never shown)."""
    host = url_host(url)
    if not require(host is not None, where, key, redact_urls(url), "an http(s) URL with a host"):
        return False
    reason = forbidden_host(host or "")
    return require(reason is None, where, key, redact_urls(url), f"a model server, not {reason}")


def require_key_bound(where: str, key: str, url: str, api_key_env: str) -> None:
    """A provider's key variable goes only to that provider's hosts, over https."""
    domains = key_hosts(api_key_env)
    host = url_host(url)
    if domains is None or host is None:
        return
    own = serves(host, domains) and urlsplit(url).scheme.lower() == "https"
    require(own, where, key, redact_urls(url),
            f"an https URL of {' or '.join(domains)}: it would be sent ${api_key_env}, that provider's key. Name "
            f"another variable in {where}.api_key_env (VLLM_API_KEY, say), set {where}.needs_key: false for a "
            f"server that needs no key, or {where}.allow_foreign_key: true for a gateway you trust with it")
