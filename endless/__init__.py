"""Endless: one conversation that goes on forever without forgetting and without growing the prompt."""

__version__ = "0.1.0"
