"""OAuth for MCP hosts: the authorization server co-hosted in the app (the MCP SDK's handlers
over Switchboard's store) and the resolution of client ID metadata documents."""
