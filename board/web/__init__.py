"""The Board: routes, pages, forms, the live stream, sessions."""
