"""Where a request, and the key it carries, may go: the hosts a provider's key belongs to, the addresses no
endpoint may name (link-local and cloud metadata), and URLs with their credentials hidden for messages.

    key_hosts("OPENAI_API_KEY")                      -> ("openai.com",)
    key_hosts("VLLM_API_KEY")                        -> None (no known provider: the key may go anywhere allowed)
    serves("eu.api.openai.com", ("openai.com",))     -> True
    forbidden_host("169.254.169.254")                -> "a link-local address (cloud metadata services live there)"
    redact_urls("cannot connect to https://me:pw@gw/v1") -> "cannot connect to https://***@gw/v1"

A params edit from an untrusted branch must not be able to send a key to a host of its choosing when a paid stage
runs: a key variable named for a provider is sent only to that provider's hosts over https, unless the endpoint
sets `allow_foreign_key: true` (a company gateway or proxy that forwards to the provider, say).
"""

from __future__ import annotations

import ipaddress
import re

# The environment variables each provider's own documentation names for its key, and the domains that key
# belongs to (the domain itself and every host under it).
PROVIDER_KEYS: dict[str, tuple[str, ...]] = {
    "OPENAI_API_KEY": ("openai.com",),
    "DEEPSEEK_API_KEY": ("deepseek.com",),
    "AZURE_OPENAI_API_KEY": ("openai.azure.com", "cognitiveservices.azure.com"),
    "ANTHROPIC_API_KEY": ("anthropic.com",),
    "GEMINI_API_KEY": ("generativelanguage.googleapis.com",),
    "GOOGLE_API_KEY": ("generativelanguage.googleapis.com",),
    "MISTRAL_API_KEY": ("mistral.ai",),
    "GROQ_API_KEY": ("groq.com",),
    "TOGETHER_API_KEY": ("together.xyz", "together.ai"),
    "OPENROUTER_API_KEY": ("openrouter.ai",),
    "FIREWORKS_API_KEY": ("fireworks.ai",),
    "XAI_API_KEY": ("x.ai",),
    "HF_TOKEN": ("huggingface.co",),
}

# Cloud metadata services by name (GCP, AWS, Azure, Alibaba, Oracle, ...): they hand out credentials to whoever asks
# from inside the machine, so no endpoint may name them.
METADATA_NAMES = frozenset({"metadata", "metadata.google.internal", "metadata.goog", "instance-data",
                            "instance-data.ec2.internal", "metadata.azure.com", "metadata.tencentyun.com"})
METADATA_ADDRESSES = frozenset({ipaddress.ip_address("fd00:ec2::254"), ipaddress.ip_address("100.100.100.200")})
_LEGACY_IPV4 = re.compile(r"^(0x[0-9a-f]+|[0-9]+)(\.(0x[0-9a-f]+|[0-9]+)){0,3}$", re.IGNORECASE)
_URL_CREDENTIALS = re.compile(r"(?i)\b([a-z][a-z0-9+.-]*://)[^/\s@'\"<>]+@")


def key_hosts(api_key_env: str) -> tuple[str, ...] | None:
    """The domains a provider's key variable belongs to; None for a variable no known provider names."""
    return PROVIDER_KEYS.get(api_key_env.upper())


def serves(host: str, domains: tuple[str, ...]) -> bool:
    """Whether `host` is one of `domains` or lies under one (a dot boundary: evilopenai.com is not openai.com)."""
    host = host.lower().rstrip(".")
    return any(host == domain or host.endswith("." + domain) for domain in domains)


def forbidden_host(host: str) -> str | None:
    """Why no request may go to `host` (a URL's hostname, as urlsplit gives it), or None when it may."""
    name = host.lower().rstrip(".")
    if name in METADATA_NAMES:
        return "a cloud metadata service's name"
    address = host_address(name)
    if address is None:
        return None
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        address = address.ipv4_mapped
    if address in METADATA_ADDRESSES:
        return "a cloud metadata service's address"
    if address.is_link_local:
        return "a link-local address (cloud metadata services live there)"
    return None


def forbidden_resolution(host: str) -> str | None:
    """Why `host` may not be called once resolved (a name whose address is link-local or a metadata service's),
    or None; a name that does not resolve is left to the request, which reports it as unreachable."""
    import socket  # here, not at the top: every stage reads the endpoints' config, few stages resolve a host

    try:
        found = socket.getaddrinfo(host, None, proto=socket.IPPROTO_TCP)
    except (OSError, UnicodeError):
        return None
    for *_, sockaddr in found:
        reason = forbidden_host(str(sockaddr[0]).split("%")[0])
        if reason is not None:
            return f"{host} resolves to {sockaddr[0]}, {reason}"
    return None


def host_address(name: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    """The IP address a hostname spells, counting the legacy IPv4 forms the resolver accepts (2852039166,
    0xa9fea9fe, 169.254.43518 all name 169.254.169.254)."""
    try:
        return ipaddress.ip_address(name)
    except ValueError:
        pass
    if not _LEGACY_IPV4.match(name):
        return None
    import socket

    try:
        return ipaddress.IPv4Address(socket.inet_aton(name))
    except OSError:
        return None


def redact_urls(text: str) -> str:
    """`text` with every URL's `user:password@` replaced by `***@`, as the bearer key is."""
    return _URL_CREDENTIALS.sub(r"\1***@", text)
