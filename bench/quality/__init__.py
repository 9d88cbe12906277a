"""The memory quality bench (bench/memory_quality.py is its entry point): datasets,
scoring, baselines, the pipeline run and the report."""
