"""What several faces share: choosing a memory, OS errors in words, answers, signals, forgetting,
the read commands, and what Endless knows of Hermes's files.  A face imports the kit, never another face."""
