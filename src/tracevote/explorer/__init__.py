"""The explorer: a static site of the project's traces, debates, critiques and grades that opens from file://."""
