"""The application: the command path (load, decide, append, and the work that follows),
used alike by the API and the workers; and the work queue they share."""
