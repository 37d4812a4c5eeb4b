"""`counting serve`: cameras counted live, a SQLite history, an HTTP API, Prometheus metrics and
a dashboard, in one process.

  config.py    the TOML configuration, checked at start-up (one line naming the file and key)
  counter.py   one frame -> count, interval, zone counts; the annotated picture
  cameras.py   camera threads: sources opened, counted at their rate, reconnected, with a state
  history.py   the history in SQLite (WAL, committed every 0.25 s, retention)
  metrics.py   the Prometheus metrics
  uploads.py   pictures posted to the API, checked in bytes, kind and pixels
  service.py   all of it running together (models loaded once, shared)
  app.py       the FastAPI app: API, /metrics, the dashboard (static/)
  videos.py    example videos made of dataset frames
"""
