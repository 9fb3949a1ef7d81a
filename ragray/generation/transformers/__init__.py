"""The transformers backend: a generator (:mod:`.backend`) over one engine (:mod:`.engine`: the CPU
engine or the GPU engine), the planner both use (:mod:`.plan`) and the KV and attention helpers.

Importing this package imports neither torch nor transformers; the generator is reached through
``ragray.generation.transformers.backend`` (the catalog's entry), which registers it.
"""
