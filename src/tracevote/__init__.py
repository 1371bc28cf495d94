"""tracevote: reproducible, cheap measurement of test-time reasoning methods over tracked trace pools."""

__version__ = "0.1.0"
