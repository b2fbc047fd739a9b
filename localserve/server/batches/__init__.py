"""OpenAI's Batch API: `/v1/files` (JSONL inputs, the batches' outputs) and `/v1/batches`.

disk.py writes atomically and appends lines that survive a `kill -9`; lines.py reads and checks
a batch's input lines and finds where a job resumes (no I/O of its own); files.py keeps the
files, jobs.py the jobs, both under the state folder; runner.py runs each job's lines against
the daemon's own endpoints at background priority; routes.py is the HTTP face.
"""
