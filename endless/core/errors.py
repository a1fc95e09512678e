"""The errors a memory raises when it cannot do what was asked; each message says what to do."""


class MemoryUseError(RuntimeError):
    """A memory that cannot be opened or changed as asked."""


class NoMemory(MemoryUseError):
    """No memory exists under that id."""
