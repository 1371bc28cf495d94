"""The simulated model: DeepSeek-format responses drawn deterministically, its loopback server and faults."""
