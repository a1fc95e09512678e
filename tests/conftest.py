"""Shared test helpers live beside this file; the end-to-end tests in ``tests/e2e`` import them too."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
