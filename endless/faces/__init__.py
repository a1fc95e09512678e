"""What people and hosts use: the Hermes plugin, the host RPC and History page, MCP, the CLI, importers."""
