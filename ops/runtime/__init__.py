"""The runtime around the Procfile's processes: their command lines, gunicorn's and
uvicorn's configuration, the preflight checks, the broker wait, process-group plumbing."""
