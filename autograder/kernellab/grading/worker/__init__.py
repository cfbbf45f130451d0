"""The side of the grade of record that runs learner code: a worker loads the learner's cells in a confined
process, calls the graded function on the cases and records every Triton launch and allowed torch call. Its
report is a record for the judge to replay, never a result."""
