"""The marks by which a simulated reply or artifact says so, shared by the simulator that sets them and the
client, stages and reports that read or print them. A module of its own, loading nothing else, so that
printing the banner costs nothing (`grade` prints it without numpy)."""

SIMULATED_BANNER = "SIMULATED MODEL: these numbers test the pipeline, not a real LLM"
# The simulator's system_fingerprint starts with this, and each reply carries the header: a client tells a
# simulated reply from a real one without trusting the params.
FINGERPRINT_PREFIX = "tracevote-sim"
SIMULATED_HEADER = "X-Tracevote-Simulated"
