"""Where and how it runs: execution, Serve, the run history and the caches."""

from __future__ import annotations




from collections.abc import Mapping
from typing import Annotated, Any, Literal


from pydantic import AfterValidator, BeforeValidator, Field, model_validator




from ragray.config.base import Executor, Section
from ragray.config.limits import DEFAULT_MAX_CALLS, check_limit_keys


class ExecutionConfig(Section):
    """Where the per-question work runs (``ragray run`` / ``ragray interpret``)."""

    executor: Executor = Field(
        "local", description="local: in this process; ray: Ray Data over generator actors"
    )
    address: str | None = Field(
        None, description="Ray cluster address (or RAY_ADDRESS); none = in-process Ray"
    )
    actors: Annotated[int, Field(ge=1)] | Literal["auto"] = Field(
        "auto", description="generator actors (each loads the model once); auto: one per GPU of the cluster "
                            "(GPUs / num_gpus), 1 on a cluster without GPUs")
    num_cpus: float | None = Field(
        None, gt=0, description="CPUs reserved per actor, and its model's threads; null: the smallest node's "
                                "cores shared by the actors on it (one actor gets them all)")
    num_gpus: Annotated[float, Field(ge=0)] | Literal["auto"] = Field(
        "auto", description="GPUs per actor (fractions share a GPU); auto: 1 when the cluster has GPUs, else 0")
    max_questions_in_flight: int | None = Field(
        None, ge=1, le=1024,
        description="questions whose prompts wait on the backend at once (local executor); null: the "
                    "backend's default (openai: 64, local models: 1)",
    )


class AutoscalingConfig(Section):
    """Ray Serve autoscaling of one deployment (replaces its fixed ``num_replicas``)."""

    min_replicas: int = Field(1, ge=0)
    max_replicas: int = Field(2, ge=1)
    target_ongoing_requests: float = Field(2.0, gt=0, description="requests per replica to aim for")

    @model_validator(mode="after")
    def _order(self) -> AutoscalingConfig:
        if self.min_replicas > self.max_replicas:
            raise ValueError(
                f"min_replicas ({self.min_replicas}) must be <= max_replicas ({self.max_replicas})"
            )
        return self


class DeploymentOptions(Section):
    """Replicas, resources and backpressure of one Ray Serve deployment."""

    num_replicas: int = Field(1, ge=1, description="fixed replica count (ignored with autoscaling)")
    autoscaling: AutoscalingConfig | None = None
    num_cpus: float = Field(0.25, ge=0, description="CPUs reserved per replica (fractions share a core)")
    num_gpus: Annotated[float, Field(ge=0)] | Literal["auto"] = Field(
        "auto", description="GPUs per replica; auto: none on a cluster without GPUs, else 1 for the "
                            "generator, 0.25 for a small model (reranker, dense encoder), 0 for no model")
    max_ongoing_requests: int = Field(4, ge=1, description="requests a replica works on at once")
    max_queued_requests: int = Field(
        32, ge=-1, description="requests waiting per caller beyond that; more are refused with 503 (-1: no limit)"
    )

    @model_validator(mode="after")
    def _queue(self) -> DeploymentOptions:
        if self.max_queued_requests == 0:
            raise ValueError("max_queued_requests must be -1 (no limit) or >= 1, got 0")
        return self


class IngressOptions(DeploymentOptions):
    """The FastAPI ingress: cheap per request, so more requests at once and a short queue."""

    num_gpus: Annotated[float, Field(ge=0)] | Literal["auto"] = Field(0.0, description="GPUs per replica (it holds no model)")
    max_ongoing_requests: int = Field(8, ge=1, description="requests a replica works on at once")
    max_queued_requests: int = Field(
        16, ge=-1, description="requests waiting per caller beyond that; more are refused with 503 (-1: no limit)"
    )


class GeneratorOptions(DeploymentOptions):
    """The generator holds the model: the largest CPU share (or a GPU)."""

    num_cpus: float = Field(0.5, ge=0, description="CPUs reserved per replica (fractions share a core)")
    max_ongoing_requests: int = Field(8, ge=1, description="requests a replica works on at once")
    batch_size: int = Field(
        8, ge=1, description="concurrent requests merged into one batched generate call (1: no batching)"
    )
    batch_wait_s: float = Field(0.02, ge=0, description="how long a batch waits to fill")


def _dotted(value: Any, prefix: str = "") -> Any:
    """``serve.limits`` as ``dotted key -> cap``, also when written nested (``--set serve.limits.a.b=1``
    nests it): ``{faithfulness: {random_repeats: 100}}`` is ``{faithfulness.random_repeats: 100}``."""
    if not isinstance(value, Mapping):
        return value
    out: dict[Any, Any] = {}
    for key, item in value.items():
        name = f"{prefix}{key}"
        out.update(_dotted(item, name + ".") if isinstance(item, Mapping) else {name: item})
    return out


class ServeConfig(Section):
    """``ragray serve`` / ``serve run``: the HTTP API and its Ray Serve deployments."""

    host: str = Field("127.0.0.1", description="HTTP bind address (0.0.0.0 to listen on every interface)")
    port: int = Field(8000, ge=1, le=65535)
    api_key_env: str = Field(
        "RAGRAY_API_KEY", description="env var holding the bearer token; auth is off while it is unset"
    )
    max_request_bytes: int = Field(1_048_576, ge=1024, description="larger request bodies get 413")
    body_timeout_s: float = Field(
        10.0, gt=0, le=3600, description="a request body not received whole within this gets 408 (slow senders "
        "hold no admission slot meanwhile)")
    max_top_k: int = Field(
        100, ge=1, description="largest top_k_docs a request may ask for, and retrieval.top_k a client may set")
    limits: Annotated[dict[str, float], BeforeValidator(_dotted), AfterValidator(check_limit_keys)] = Field(
        default_factory=dict, description="caps on the numbers a client may set, by dotted key "
        "({faithfulness.random_repeats: 500}): each replaces its default cap (docs/serve.md has the table, "
        "ragray.config.limits.CAPS the list)")
    max_calls_per_request: int = Field(
        DEFAULT_MAX_CALLS, ge=1, description="model calls one request may cost at most (a run: questions x each "
        "question's calls, from the influence or faithfulness settings; an upper bound), checked before it starts")
    max_prompts_per_call: int = Field(
        16, ge=0, description="prompts one model call of a request or an HTTP run sends at most (larger calls are "
        "split): between calls the work checks whether it was cancelled and other requests get the model. "
        "0: no split (fastest on a GPU; a cancel then waits for a question's whole call)")
    stop_timeout_s: float = Field(
        5.0, gt=0, description="on SIGTERM / Ctrl-C, how long ragray serve --no-ray waits for requests and runs "
        "to stop (each stops at its next model call) before it records the runs interrupted and exits")
    timeout_s: float = Field(600.0, gt=0, description="longest wait for a deployment call")
    insecure: bool = Field(
        False, description="serve on a host other than loopback without an API key (a warning at every start); "
        "off: such a server refuses to start until $<api_key_env> is set"
    )
    client_settings: tuple[str, ...] | None = Field(
        None, description="the settings an HTTP client may choose per request (POST /runs overrides, presets "
        "saved over HTTP); none: ragray.config_access.CLIENT_SETTINGS (no model, backend, endpoint, key, "
        "device or path)"
    )
    datasets: dict[str, str] = Field(
        default_factory=dict, description="datasets a client may pick by name (data.path=<name>): name -> "
        "file or folder; the built-in names (demo, squad, ...) are always offered"
    )
    runs_dir: str = Field("runs", description="where POST /runs writes run directories")
    presets_dir: str = Field("configs", description="YAML configs offered as presets")
    ingress: IngressOptions = Field(default_factory=IngressOptions)
    retriever: DeploymentOptions = Field(default_factory=DeploymentOptions)
    reranker: DeploymentOptions = Field(default_factory=DeploymentOptions)
    generator: GeneratorOptions = Field(default_factory=GeneratorOptions)


class DashboardConfig(Section):
    """``ragray dashboard`` (and ``/dashboard`` of ``ragray serve``): what a CSV upload may take.
    Beyond loopback the dashboard needs the API key ``$<serve.api_key_env>``, like ``ragray serve``."""

    max_upload_bytes: int = Field(
        20 * 2**20, ge=1024, description="largest CSV a POST /upload takes (413 above it, nothing written); "
        "20 MiB holds the row limit of an upload (200,000 passages) of ragray's own passages.csv"
    )
    max_uploads: int = Field(
        50, ge=0, description="uploaded runs RUNS_DIR/uploads may hold; one more is a 409 until some are "
        "deleted (0: uploads off). With max_upload_bytes it bounds the disk uploads can take"
    )


class HistoryConfig(Section):
    """Run history and presets in a database (SQLite by default; any SQLAlchemy URL)."""

    url: str | None = Field(
        None,
        description="SQLAlchemy URL, e.g. sqlite:////abs/path.sqlite or postgresql://user@host/db (null: "
        "history.sqlite in ragray's data folder, $RAGRAY_HOME or ~/.local/share/ragray)",
    )
    record: bool = Field(True, description="record every run/interpret/audit/score/sweep in the history")


class CacheConfig(Section):
    """Fingerprint caches shared by runs and sweep trials (a changed input never hits)."""

    dir: str | None = Field(None, description="default: ~/.cache/ragray")
    chunksets: bool = Field(True, description="chunked corpora, keyed by corpus + chunking config")
    indexes: bool = Field(True, description="built retrieval indexes, keyed by chunk set + retriever config")
    retrievals: bool = Field(True, description="final hits per question, keyed by everything retrieval depends on")
    calls: bool = Field(
        True, description="model calls (greedy generations and log-prob scores) in <dir>/calls.sqlite, keyed by "
                          "model identity, prompt and sampling: a repeated call is never paid twice",
    )
    embeddings: bool = Field(
        True, description="answer-metric sentence embeddings in <dir>/embeddings.sqlite, keyed by encoder "
                          "model and text: a rerun reads them instead of encoding again",
    )
    namespace: str | None = Field(
        None, pattern=r"^[A-Za-z0-9_.-]+$", max_length=128,
        description="keep the per-question (per-sample) indexes under <dir>/ephemeral/<namespace>/ "
                    "(a sweep with ephemeral.namespace sets one per trial and deletes or expires them)",
    )


