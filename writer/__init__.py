"""The summary writer: the pool that writes and merges lines (DESIGN §3)."""
