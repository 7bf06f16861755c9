"""Reading profiler output into the model; never imports textual or a framework.

discover.py   logdir → runs → sessions → host files, from listings alone (every format)
load.py       session → ProfileSummary through the cache: the reader seam (READERS)
assemble.py   what every reader shares: averages, Tensor Core use, verdict and advice
advice.py     the bottleneck rules and recommendations (one place for the thresholds)
cache.py      summaries cached by (path, size, mtime)
prefetch.py   the first listing and summary, computed in a thread while the TUI loads
xplane/       TensorFlow/JAX `*.xplane.pb`: the converter, the own step finder, the decoder
"""
