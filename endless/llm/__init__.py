"""Model clients: a neutral request, its OpenAI and Anthropic forms, one client per SDK (DESIGN §3.4)."""
