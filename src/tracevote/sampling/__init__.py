"""Paid model calls: the HTTP client, backends, retries, concurrency, probe, spend guard, prompts."""
