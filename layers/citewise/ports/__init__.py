"""The contracts the pipeline is written against (blob store, registry, index, embedder, synthesizer),
with the rules they share; every adapter passes one contract suite per port (tests/contract)."""
