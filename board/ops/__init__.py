"""What runs beside the surfaces: sweeps, hooks, metrics, health."""
