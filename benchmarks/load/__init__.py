"""The load model (locustfile.py) and what the capacity and soak scripts share (run.py)."""
