"""The simulated-model banner every report and the grading lines start with, in a module of its own so that
printing it loads nothing else (`grade` prints it without numpy)."""

SIMULATED_BANNER = "SIMULATED MODEL: these numbers test the pipeline, not a real LLM"
