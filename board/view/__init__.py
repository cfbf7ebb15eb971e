"""What a person is shown of a todo, computed once from one store read and taken as it is by
every surface that draws it: the Board's drawer (board/web), the A2UI todo detail resource
and the MCP App (board/mcp). Plain data in, plain JSON-ready data out; no surface's markup."""
