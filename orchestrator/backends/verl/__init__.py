"""The verl backend (docs/verl.md); importing it does not import verl: composition against
verl's config runs in a subprocess (:mod:`~orchestrator.backends.verl.preflight`)."""
