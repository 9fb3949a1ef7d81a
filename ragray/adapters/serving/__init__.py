"""The HTTP API: retriever, reranker and generator as Ray Serve deployments behind FastAPI.

:mod:`~ragray.adapters.serving.service` holds what each endpoint does, :mod:`~ragray.adapters.serving.api` the
FastAPI routes and middleware, :mod:`~ragray.adapters.serving.app` the Serve deployments and the
``serve run`` application builder. :mod:`~ragray.adapters.serving.inflight` tracks the work under way
(to cancel it), :mod:`~ragray.adapters.serving.disconnect` stops a request whose client is gone.
"""
