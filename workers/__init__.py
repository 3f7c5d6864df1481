"""RQ workers: the jobs (bot turns, turn timeouts, settlement) and the sweeper that finds lost work."""
