"""The one transactional store: every statement that reads or changes a todo, and what it needs."""
