import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
if str(REPO) not in sys.path:  # the benchmarks package lives at the repo root, not in flintlock
    sys.path.insert(0, str(REPO))
