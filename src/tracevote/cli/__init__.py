"""`python -m tracevote ...`: argument parsing, the commands behind it, and `make demo`."""
