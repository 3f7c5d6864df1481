"""The WSGI entry point for gunicorn: ``gunicorn service.api.wsgi:app``."""

from . import create_app

app = create_app()
