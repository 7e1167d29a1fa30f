"""Prometheus metrics, one registry per app: request latency, annotated texts and entities,
micro-batch sizes, jobs and evaluations by state (read from the store at scrape time).

With several API processes (``mslm serve --workers N``, MSLM_API_PROCESSES) each process
writes its metrics to files in one folder (``PROMETHEUS_MULTIPROC_DIR``, made by ``mslm serve``)
and a scrape of any of them reads them all, so /metrics counts every process's requests and not
the one the scrape happened to reach."""

from __future__ import annotations

import collections
import logging
import os
from collections.abc import Callable, Iterator, Sequence

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.multiprocess import MultiProcessCollector
from prometheus_client.registry import Collector

from mslm_core.types import Entity

log = logging.getLogger(__name__)

#: The folder the processes of one ``mslm serve --workers N`` share their metrics through.
MULTIPROCESS_DIR = "PROMETHEUS_MULTIPROC_DIR"
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
        #: where the processes of this API write their metrics (None: one process)
        self.shared = os.environ.get(MULTIPROCESS_DIR) or None
        self.store: StoreCollector | None = None
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
            "mslm_active_model_info",
            "the model this replica serves",
            ["model"],
            registry=r,
            multiprocess_mode="mostrecent",  # of the replica's processes, the latest said
        )
        self.auth_failures = Counter(
            "mslm_auth_failures", "refused credentials", ["reason"], registry=r
        )

    def watch_store(self, counts: Callable[[], dict[str, dict[str, int]]]) -> None:
        self.store = StoreCollector(counts)
        self.registry.register(self.store)

    def serving(self, model_id: str, previous: str | None) -> None:
        """``model_id`` is served now, in place of ``previous``."""
        if previous:
            if self.shared is not None:  # its file keeps it: 0 is what the others read
                self.active_model.labels(previous).set(0)
            self.active_model.remove(previous)
        self.active_model.labels(model_id).set(1)

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
        if self.shared is None:
            return generate_latest(self.registry)
        every = CollectorRegistry()  # every process's metrics, from their files
        MultiProcessCollector(every, self.shared)  # type: ignore[no-untyped-call]
        if self.store is not None:
            every.register(self.store)
        return generate_latest(every)
