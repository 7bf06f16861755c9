"""A step's timeline: its host threads and device streams, events clipped to the step.

Contract: `load.load_timeline(session)` reads a session's events once into per-track sorted
arrays (`model.Timeline`); `Timeline.step(n)` cuts one step out (`model.StepTimeline`, times in
µs from the step's start, the span equal to the step's time in the summary); `bins.bin_track`
turns a track into one category per terminal cell with numpy `searchsorted`, never a per-event
loop per frame. UI-free: the renderables and the TUI draw from these arrays.
"""
