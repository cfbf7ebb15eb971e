"""The one LISTEN connection per process, fanned out, and the caches it keeps honest."""
