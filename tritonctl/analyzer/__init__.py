"""Load generation, measurement and configuration search."""
