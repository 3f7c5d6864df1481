"""RQ workers: bot turns (seats the system plays), and the dispatch that enqueues them."""
