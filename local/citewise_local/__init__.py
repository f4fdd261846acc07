"""citewise_local: the library on one laptop (folder, SQLite and MiniLM adapters, `citewise serve`, the CLI).

Never bundled in the Lambda layer. It depends on `citewise`, never the other way round: the library finds
this package's backend and embedder through the entry points it registers (see `citewise.runtime.services`).
"""
