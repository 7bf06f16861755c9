"""tuiprof: browse TensorBoard profiles and compare repeated training runs in the terminal."""

__version__ = "0.1.0"
