"""Prometheus metrics, one registry per app: request latency, annotated texts and entities,
micro-batch sizes, jobs and evaluations by state (read from the store at scrape time)."""

from __future__ import annotations

import collections
import logging
from collections.abc import Callable, Iterator, Sequence

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from mslm_core.types import Entity

log = logging.getLogger(__name__)

LATENCY_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)


class StoreCollector(Collector):
    """``mslm_jobs{state}`` and ``mslm_evaluations{state}`` counted in the job store."""

    def __init__(self, counts: Callable[[], dict[str, dict[str, int]]]):
        self.counts = counts

    def collect(self) -> Iterator[GaugeMetricFamily]:
        try:
            counts = self.counts()
        except Exception as exc:
            log.warning("job counts unavailable: %s", type(exc).__name__)
            return
        for name, by_state in counts.items():
            family = GaugeMetricFamily(f"mslm_{name}", f"{name} by state", labels=["state"])
            for state, n in sorted(by_state.items()):
                family.add_metric([state], n)
            yield family


class Metrics:
    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        r = self.registry
        self.request_seconds = Histogram(
            "mslm_http_request_duration_seconds",
            "HTTP request latency",
            ["method", "route", "status"],
            buckets=LATENCY_BUCKETS,
            registry=r,
        )
        self.texts = Counter("mslm_annotated_texts", "texts annotated", ["model"], registry=r)
        self.characters = Counter(
            "mslm_annotated_characters", "characters annotated", ["model"], registry=r
        )
        self.entities = Counter("mslm_entities", "entities returned", ["model", "type"], registry=r)
        self.batch_texts = Histogram(
            "mslm_microbatch_texts",
            "texts per inference micro-batch",
            buckets=(1, 2, 4, 8, 16, 32, 64, 128, 256, 512),
            registry=r,
        )
        self.inference_seconds = Histogram(
            "mslm_inference_seconds",
            "inference time per micro-batch",
            buckets=LATENCY_BUCKETS,
            registry=r,
        )
        self.abandoned = Counter(
            "mslm_annotate_abandoned",
            "annotate requests whose client left before the answer (their work was dropped)",
            registry=r,
        )
        self.model_loads = Counter(
            "mslm_model_loads", "model loads by outcome", ["outcome"], registry=r
        )
        self.active_model = Gauge(
            "mslm_active_model_info", "the model this replica serves", ["model"], registry=r
        )
        self.auth_failures = Counter(
            "mslm_auth_failures", "refused credentials", ["reason"], registry=r
        )

    def watch_store(self, counts: Callable[[], dict[str, dict[str, int]]]) -> None:
        self.registry.register(StoreCollector(counts))

    def count_annotated(
        self, model_id: str, texts: Sequence[str], entities: Sequence[Sequence[Entity]]
    ) -> None:
        """Texts, characters and entities by type that ``model_id`` answered with: every path
        that annotates for a client (``/annotate``, Label Studio's ``/predict``)."""
        self.texts.labels(model_id).inc(len(texts))
        self.characters.labels(model_id).inc(sum(len(t) for t in texts))
        for etype, n in collections.Counter(e.type for ents in entities for e in ents).items():
            self.entities.labels(model_id, etype).inc(n)

    def observe_request(self, method: str, route: str, status: int, seconds: float) -> None:
        self.request_seconds.labels(method, route, str(status)).observe(seconds)

    def render(self) -> bytes:
        return generate_latest(self.registry)
