"""tracevote: reproducible, cheap measurement of test-time reasoning methods over tracked trace pools."""

import os

# Set before numpy loads (every stage and command imports tracevote first): at load, numpy's OpenBLAS starts a thread
# per core that spins ~0.1 CPU s before it sleeps, and no tracevote process does linear algebra big enough to use
# them (a stage or command paid it for nothing; docs/project.md, "How the suite runs", has the figures). A value the
# user set is kept.
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

__version__ = "0.1.0"
