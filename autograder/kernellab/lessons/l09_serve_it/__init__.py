"""Lesson 09: attention for serving - one query token against a long KV cache: split-KV and its merge, a paged
cache with a block table, per-sequence lengths, grouped-query heads, and speed against the copy bandwidth."""
