"""Grading a whole class: the queue of (student, problem) jobs, GPU slots (untimed together, timed alone), pausing
untimed processes while one times, CPU cores kept for timing, Ray across nodes, and GPU-busy sampling."""
