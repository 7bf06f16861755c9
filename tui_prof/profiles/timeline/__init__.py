"""A step's timeline: its host threads and device streams, events clipped to the step.

Contract: `load.load_timeline(session)` reads a session's events once into per-track sorted
arrays (`model.Timeline`); `Timeline.step(n)` cuts one step out (`model.StepTimeline`, times in
µs from the step's start, the span equal to the step's time in the summary); `bins.bin_track`
turns a track into one category per terminal cell with numpy `searchsorted`, never a per-event
loop per frame. UI-free: the renderables and the TUI draw from these arrays.
"""

# Set ("1") where the timeline may be opened after the summary (the TUI sets it for itself and
# its analysis child, which inherits it): the readers then index a large session's events while
# they read it (store.index_while_reading). Headless summaries (`tuiprof summary`, an
# experiment's runs) leave it unset and pay nothing. Here, not in store: the TUI's launcher
# names it before anything imports numpy.
INDEX_ENV = "TUIPROF_TIMELINE_INDEX"
