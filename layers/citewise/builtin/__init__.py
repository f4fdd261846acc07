"""Adapters that call no service, shipped with the library: the deterministic hashing embedder (tests,
smoke deployments) and the extractive synthesizer (answers without a model)."""
