"""The harness built on the simulator: the scripted replay, recall checks and `endless demo`."""
