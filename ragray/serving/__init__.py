"""The HTTP API: retriever, reranker and generator as Ray Serve deployments behind FastAPI.

:mod:`~ragray.serving.service` holds what each endpoint does, :mod:`~ragray.serving.api` the
FastAPI routes and middleware, :mod:`~ragray.serving.app` the Serve deployments and the
``serve run`` application builder.
"""
