"""The one way Endless talks to a model (DESIGN §3.4).

Turns, the writer, chat, replay and the Hermes plugin all call through this
layer, so the bytes sent, the cache marks and the error kinds are the same
whoever calls.  It imports nothing else of Endless: ``request`` is the
neutral request; ``openai_api`` and ``anthropic_api`` the two wire forms and
clients; ``client`` the contract they share; ``connect`` makes the client for a route;
``errors``, ``routes`` and ``models`` what the clients stand on.
"""
