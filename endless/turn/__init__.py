"""The turn protocol (DESIGN §4): the request a harness sends instead of its own history."""
