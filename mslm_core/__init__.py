"""MSLM: biomedical entity extraction with Mask Specific Language Modeling fine-tuning."""

__version__ = "0.1.0"
