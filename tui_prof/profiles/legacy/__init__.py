"""Older TensorBoard profile files (TensorFlow 2.2-2.3 wrote its tools' results itself, per host:
`*.overview_page.pb`, `*.input_pipeline.pb`, `*.tensorflow_stats.pb`, `*.kernel_stats.pb`).

`reader.summarize` is this format's entry point (see `tui_prof.profiles.load.READERS`);
`tools` parses the files with the schemas that ship in `xprof`.
"""
