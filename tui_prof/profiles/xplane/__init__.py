"""TensorFlow/JAX XSpace profiles (`*.xplane.pb`): TensorBoard's converter first, own step finder
where it finds none, and a TensorFlow-free memory-mapped decoder for large files.

`reader.summarize` is this format's entry point (see `tui_prof.profiles.load.READERS`).
"""
