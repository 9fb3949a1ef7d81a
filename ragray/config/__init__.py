"""Typed, nested experiment configuration loaded from YAML.

One frozen pydantic model per component, nested in :class:`ExperimentConfig`. Loading rejects
unknown keys, and every validation error is turned into one :class:`ConfigError` whose lines read
``retrieval.top_k must be >= 1, got 0``. ``--set a.b=c`` overrides are applied to the raw mapping
before validation, so they are checked exactly like file values.

The sections live in one module each (:mod:`ragray.config.retrieval`, ``generation``, ``measures``,
``runtime``), the whole in :mod:`ragray.config.experiment`, loading in :mod:`ragray.config.loading`;
the caps on the numbers an HTTP client may set in :mod:`ragray.config.limits`, and the plain YAML
of its overrides in :mod:`ragray.config.plain`.
"""

from __future__ import annotations

from ragray.config.base import (
    Scope,
    Dtype,
    InfluenceMode,
    PositionControl,
    UsedRule,
    Level,
    FaithfulnessMode,
    Explainer,
    Executor,
    SCOPES,
    DTYPES,
    INFLUENCE_MODES,
    POSITION_CONTROLS,
    LEVELS,
    FAITHFULNESS_MODES,
    EXPLAINERS,
    EXECUTORS,
    RECORD_FIELDS,
    Section,
)
from ragray.config.retrieval import (
    DataConfig,
    ChunkingConfig,
    BM25Config,
    DenseConfig,
    HybridConfig,
    ExpandConfig,
    RetrievalConfig,
    RerankConfig,
)
from ragray.config.generation import (
    TransformersConfig,
    VLLMConfig,
    OpenAIConfig,
    GenerationConfig,
)
from ragray.config.measures import (
    InfluenceConfig,
    BucketsConfig,
    DecisionConfig,
    ControlsConfig,
    FaithfulnessConfig,
    AuditConfig,
    PriceConfig,
    MetricsConfig,
)
from ragray.config.runtime import (
    ExecutionConfig,
    AutoscalingConfig,
    DeploymentOptions,
    IngressOptions,
    GeneratorOptions,
    ServeConfig,
    DashboardConfig,
    HistoryConfig,
    CacheConfig,
)
from ragray.config.experiment import (
    ExperimentConfig,
)
from ragray.config.loading import (
    format_validation_error,
    validate_config,
    parse_override,
    apply_overrides,
    read_yaml,
    load_config,
    read_config_file,
)

__all__ = [
    "Scope",
    "Dtype",
    "InfluenceMode",
    "PositionControl",
    "UsedRule",
    "Level",
    "FaithfulnessMode",
    "Explainer",
    "Executor",
    "SCOPES",
    "DTYPES",
    "INFLUENCE_MODES",
    "POSITION_CONTROLS",
    "LEVELS",
    "FAITHFULNESS_MODES",
    "EXPLAINERS",
    "EXECUTORS",
    "RECORD_FIELDS",
    "Section",
    "DataConfig",
    "ChunkingConfig",
    "BM25Config",
    "DenseConfig",
    "HybridConfig",
    "ExpandConfig",
    "RetrievalConfig",
    "RerankConfig",
    "TransformersConfig",
    "VLLMConfig",
    "OpenAIConfig",
    "GenerationConfig",
    "InfluenceConfig",
    "BucketsConfig",
    "DecisionConfig",
    "ControlsConfig",
    "FaithfulnessConfig",
    "AuditConfig",
    "PriceConfig",
    "MetricsConfig",
    "ExecutionConfig",
    "AutoscalingConfig",
    "DeploymentOptions",
    "IngressOptions",
    "GeneratorOptions",
    "ServeConfig",
    "DashboardConfig",
    "HistoryConfig",
    "CacheConfig",
    "ExperimentConfig",
    "format_validation_error",
    "validate_config",
    "parse_override",
    "apply_overrides",
    "read_yaml",
    "load_config",
    "read_config_file",
]
