"""PyTorch profiler (Kineto) Chrome-trace JSON: discovery rules, streaming reader and analysis."""
