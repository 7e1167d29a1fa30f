"""What annotation jobs read and write: the service's ``mslm_core.notes.NOTE_FORMATS`` and
``store.bulk.OUTPUT_FORMATS`` (a test keeps them equal). Plain constants, so that ``mslm
bulk``'s parser is built without importing httpx."""

NOTE_FORMATS = ("parquet", "fhir", "bioc", "jsonl", "tsv", "csv", "pubtator", "text")
OUTPUT_FORMATS = ("jsonl", "bioc", "pubtator", "fhir", "note_nlp_csv", "note_nlp_parquet")
