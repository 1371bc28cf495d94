"""Grading prediction files: accuracy by Math-Verify, reasoning length, and an optional LLM critic."""
