"""The HTTP API (FastAPI): annotation with micro-batching and hot-swapped models, datasets,
fine-tuning jobs, models and evaluations. Depends on ``worker`` and ``mslm_core``."""
