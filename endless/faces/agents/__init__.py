"""Coding agents (Claude Code, Codex): their hooks, the hand-over at a session start, install and uninstall."""
