"""Reading profiler output into the model; never imports textual or a framework.

discover.py   logdir → runs → sessions → host files, from listings alone (every format)
load.py       session → ProfileSummary through the cache: the reader seam (READERS)
assemble.py   what every reader shares: averages, Tensor Core use, verdict and advice
advice.py     the verdict (what dominates, secondary findings) and which remedies apply
remedies.py   the remedies' words, per framework and per row of the hardware table
hardware.py   a profile's device → its row of the hardware table
hardware_table.py  the rows: matrix units' formats and word, peaks, memory bandwidth, sources
kernel_names.py  what a kernel's name says: matrix units, 16-bit, collective
cache.py      summaries cached by (path, size, mtime)
prefetch.py   the first listing and summary, computed in a child process while the TUI loads
forked.py     a helper process forked where that is safe, instead of a new Python interpreter
xplane/       TensorFlow/JAX `*.xplane.pb`: the converter, the own step finder, the decoder
"""
