"""The MCP endpoint: the server, its tools and the doorbell."""
