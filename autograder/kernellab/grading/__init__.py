"""The grade of record: every graded problem in its own process, judged by trusted code."""
