"""Where things are, for tests in any folder below this one."""

from pathlib import Path

TESTS = Path(__file__).resolve().parent
REPO = TESTS.parent
PROCS = TESTS / "procs"
FIXTURES = TESTS / "fixtures"
