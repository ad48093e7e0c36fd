"""What every other package leans on and that knows nothing of the configuration: the error base, JSON types,
YAML loading, process exit and Node selection, checkout paths, and the pinned upstream paths and commits."""
