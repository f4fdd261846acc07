"""Synthesizer port and its adapters. See `base.Synthesizer`."""

from citewise.synthesis.base import NO_ANSWER, Synthesizer

__all__ = ["NO_ANSWER", "Synthesizer"]
