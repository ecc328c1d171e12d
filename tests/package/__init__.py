"""The package as a whole: its shape, its docs, its errors, its benchmarks' helpers."""
