"""The marks by which a simulated reply or artifact says so, shared by the simulator that sets them and the
client, stages and reports that read or print them; and the headers by which the client tells the simulator
which call it makes. A module of its own, loading nothing else, so that printing the banner costs nothing
(`grade` prints it without numpy)."""

SIMULATED_BANNER = "SIMULATED MODEL: these numbers test the pipeline, not a real LLM"
# The simulator's system_fingerprint starts with this, and each reply carries the header: a client tells a
# simulated reply from a real one without trusting the params.
FINGERPRINT_PREFIX = "tracevote-sim"
SIMULATED_HEADER = "X-Tracevote-Simulated"
# The owner sim-server's /models list gives every model: a paid stage asks a local server before its opening
# estimate (tracevote.sampling.identify), so the estimate says SIMULATED before any request is paid for.
MODELS_OWNER = "tracevote"
# Sent by the client with every request (real servers ignore them): the call key, which seeds the simulated
# reply, and the kind of call its prompt builder names, by which the simulator answers it.
SAMPLE_HEADER = "X-Tracevote-Sample"
KIND_HEADER = "X-Tracevote-Kind"
SOLVE = "solve"  # the kind every method starts from, and what a request without KIND_HEADER is
