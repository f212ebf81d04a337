"""The Profiler: compile each listed checkpoint for the device, then profile it with a method (mlia | on-device).

    session.py   the compile -> profile sequence, for np run (inline) and np profile (post-hoc)
    methods/     one module per method, registered by name; each has one `profile(request)` function
    cache.py     reuse of earlier estimates (never of measurements)
    render.py    the log lines of a result
"""
