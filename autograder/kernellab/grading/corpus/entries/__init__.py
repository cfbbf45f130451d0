"""The corpus's entries, one a file: `ENTRY` in each (see ../entry.py)."""
