"""The settings a client refuses before it sends anything: top_logprobs, max_tokens, extra_body, reasoning effort,
a missing key, and where a request and its key may go (check_params's rules again, plus the addresses a host's
name resolves to: a ModelConfig made in code skips check_params)."""

from __future__ import annotations

from tracevote.core.config_deepconf import DecodingConfig
from tracevote.core.config_endpoints import ModelConfig, base_urls, require_effort, url_host
from tracevote.core.errors import ConfigError
from tracevote.core.hosts import forbidden_host, forbidden_resolution, key_hosts, redact_urls, serves
from tracevote.core.limits import check_extra_body


def check_settings(model: ModelConfig, decoding: DecodingConfig, api_key: str | None) -> None:
    most = model.profile.max_top_logprobs or 0
    if not 0 <= decoding.top_logprobs <= most:
        raise ConfigError(f"decoding.top_logprobs: {decoding.top_logprobs!r} must be 0-{most} (the most "
                          f"{model.name}, profile {model.profile.name}, returns)")
    if decoding.max_tokens < 1:
        raise ConfigError(f"decoding.max_tokens: {decoding.max_tokens!r} must be >= 1")
    check_extra_body("model", model.extra_body)  # check_params applies the same rule
    require_effort(f"endpoints.{model.endpoint}", model.reasoning_effort, model.profile)
    if model.needs_key and not api_key:
        raise ConfigError(f"endpoints.{model.endpoint}.needs_key is true but ${model.api_key_env} is not set "
                          f"(environment or .env); set it, or set needs_key false for a local server")
    for url in base_urls(model.base_url):
        _check_destination(model, url, api_key)


def _check_destination(model: ModelConfig, url: str, api_key: str | None) -> None:
    """check_params's rules for where a request and its key go, again where they are sent (a ModelConfig made
    in code skips check_params), plus the addresses the host's name resolves to."""
    host = url_host(url)
    where = f"endpoints.{model.endpoint}.base_url"
    if host is None:
        raise ConfigError(f"{where}: {redact_urls(url)!r} must be an http(s) URL with a host")
    reason = forbidden_host(host) or forbidden_resolution(host)
    if reason is not None:
        raise ConfigError(f"{where}: {redact_urls(url)!r} must be a model server, not {reason}; nothing was sent")
    domains = key_hosts(model.api_key_env)
    if api_key and domains and not model.allow_foreign_key and not (
            serves(host, domains) and url.lower().startswith("https://")):
        raise ConfigError(f"{where}: {redact_urls(url)!r} is not an https URL of {' or '.join(domains)}, and "
                          f"${model.api_key_env} is that provider's key; nothing was sent (set "
                          f"endpoints.{model.endpoint}.allow_foreign_key: true for a gateway you trust with it)")
