"""Stage 4, results: runs stored with their provenance under ``results/<site>/`` and
compared (store index, compare, drift, references from history, ReFrame database import)."""
