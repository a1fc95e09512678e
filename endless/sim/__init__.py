"""The provider simulator: wire formats, prompt-cache models, a simulated clock, scripted models.

Shipped in the package because the demo, the tests and the benchmarks all run
on it; it depends on nothing else of Endless.
"""
