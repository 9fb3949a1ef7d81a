"""The whole experiment: one section per component."""

from __future__ import annotations



from pathlib import Path


import yaml
from pydantic import Field




from ragray.config.base import Section
from ragray.config.retrieval import DataConfig, ChunkingConfig, RetrievalConfig, RerankConfig
from ragray.config.generation import GenerationConfig
from ragray.config.measures import InfluenceConfig, FaithfulnessConfig, AuditConfig, MetricsConfig
from ragray.config.runtime import ExecutionConfig, ServeConfig, DashboardConfig, HistoryConfig, CacheConfig


class ExperimentConfig(Section):
    name: str = "default"
    seed: int = 0
    data: DataConfig = Field(default_factory=DataConfig)
    chunking: ChunkingConfig = Field(default_factory=ChunkingConfig)
    retrieval: RetrievalConfig = Field(default_factory=RetrievalConfig)
    rerank: RerankConfig = Field(default_factory=RerankConfig)
    generation: GenerationConfig = Field(default_factory=GenerationConfig)
    influence: InfluenceConfig = Field(default_factory=InfluenceConfig)
    faithfulness: FaithfulnessConfig = Field(default_factory=FaithfulnessConfig)
    audit: AuditConfig = Field(default_factory=AuditConfig)
    metrics: MetricsConfig = Field(default_factory=MetricsConfig)
    execution: ExecutionConfig = Field(default_factory=ExecutionConfig)
    serve: ServeConfig = Field(default_factory=ServeConfig)
    dashboard: DashboardConfig = Field(default_factory=DashboardConfig)
    history: HistoryConfig = Field(default_factory=HistoryConfig)
    cache: CacheConfig = Field(default_factory=CacheConfig)

    def to_yaml(self) -> str:
        return yaml.safe_dump(self.model_dump(mode="json"), sort_keys=False)

    def save(self, path: str | Path) -> Path:
        """Write the resolved config (every default filled in) so any result can be reproduced."""
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(self.to_yaml(), encoding="utf-8")
        return path


# ---------------------------------------------------------------------------------------------
# loading


