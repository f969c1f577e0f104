"""The embedded backend: a small but real RL trainer that runs every algorithm on CPU."""
