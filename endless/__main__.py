"""``python -m endless``: the command line, for hooks that name the interpreter itself (no PATH needed)."""

from endless.cli import main

raise SystemExit(main())
