"""The capacity model of bench/capacity.py: fitting it to measured points and predicting with it.

Plain functions of plain data (numpy only), so that they are read, and tested, apart from the
measuring (tests/package/test_capacity_model.py). The terms, per query class:

    work_p   = w0 + w_shard * shards_p + w_file * files_p + w_byte * bytes_p   (CPU s of partition p)
    merge    = d0 + fan * partitions                                          (CPU s of the merging process)
    latency  = wait + merge + scale * answered(work_p, cores, early stop)
               + crowd * answered * max(0, partitions / cores - 1)                  (this machine)
    latency  = wait + merge + scale * work_p = hop + fan * partitions + scale * work_p
                                                                     (real nodes; hop = wait + d0)
    p99      = tail * p50

(``answered``: when the partitions' answers are in, their work sharing the machine's cores, the
pool's early stop at the match budget included.)

A measured configuration (``data["configs"]``, as bench/capacity.py saves it) holds, per class,
each partition's CPU per search and stats (``direct_cpu``, ``parts``) and the wall times of
searches through the pool (``lat``). docs/capacity.md explains the model and its limits.
"""

from __future__ import annotations

import itertools
import math
import statistics

WORK_TERMS = ["one", "shards", "files", "bytes"]
LATENCY_TERMS = ["one", "partitions"]
TIME_TERMS = ["one", "t", "crowded"]
GB = 1e9
GiB = 1 << 30


def percentile(samples: list[float], p: float) -> float:
    """Nearest rank."""
    s = sorted(samples)
    return s[max(0, math.ceil(p / 100 * len(s)) - 1)]


def fit(rows: list[dict], terms: list[str], y: str, scale: str | None = None) -> dict[str, float]:
    """Least squares of ``row[y] ≈ Σ_t c_t · row[t]`` on relative error (each row weighted by
    1 / ``row[scale or y]``: a 2 ms point counts as much as a 2 s one), every ``c_t ≥ 0``: of the
    subsets of `terms` whose solution has no negative coefficient, the one with the smallest
    error (a term the data cannot support, e.g. a per-byte cost of a class that verifies
    nothing, is 0)."""
    import numpy as np

    target = np.array([r[y] for r in rows], dtype=float)
    w = 1.0 / np.maximum(np.abs(np.array([r[scale or y] for r in rows], dtype=float)), 1e-9)
    best: tuple[float, dict[str, float]] | None = None
    for n in range(len(terms), 0, -1):
        for subset in itertools.combinations(terms, n):
            a = np.array([[r[t] for t in subset] for r in rows], dtype=float)
            coef, *_ = np.linalg.lstsq(a * w[:, None], target * w, rcond=None)
            if (coef < 0).any():
                continue
            err = float(np.sum(((a @ coef - target) * w) ** 2))
            if best is None or err < best[0] * (1 - 1e-9):
                best = (err, {t: 0.0 for t in terms} | {t: float(c) for t, c in zip(subset, coef, strict=True)})
    return best[1] if best else {t: 0.0 for t in terms}


def apply(coef: dict[str, float], row: dict) -> float:
    return sum(c * row[t] for t, c in coef.items())


def answered(works: list[float], matches: list[int], cores: float, budget: int | None) -> float:
    """When the pool has its answer: the partitions run at once on `cores` cores, each at
    ``min(1, cores / running)`` of a core (processor sharing); the answer is complete when the
    last partition finishes or, with a match `budget` (the pool's early stop: a query that names
    no identifier), as soon as the partitions finished so far found more than `budget` matches
    (the others are cancelled). Without a budget this is at least the slowest partition and
    all the work spread over the cores; on real nodes (a core each) the slowest partition."""
    left = sorted(zip(works, matches, strict=True))
    t, found, done = 0.0, 0, 0
    for i, (w, m) in enumerate(left):
        rate = min(1.0, cores / (len(left) - i))
        t += (w - done) / rate
        done = w
        found += m
        if budget is not None and found > budget:
            break
    return t


def work_rows(data: dict, cls: str) -> list[dict]:
    """One row per partition of every configuration: shards, files, bytes verified, CPU per search."""
    rows = []
    for c in data["configs"]:
        m = c["classes"].get(cls)
        for i, (part, cpu) in enumerate(zip(m["parts"], m["direct_cpu"], strict=True) if m else ()):
            rows.append({"size": c["size"], "P": c["partitions"], "p": i, "one": 1.0, "shards": c["part_shards"][i],
                         "index_bytes": c["part_bytes"][i], "files": part["files"], "bytes": part["bytes"],
                         "truncated": part["truncated"], "matches": part.get("matches", 0), "cpu": cpu})
    return rows


def verified_rule(rows: list[dict]) -> dict:
    """How much a partition of a class verifies, as a function of its size, for the prediction:
    a fixed fraction of its index (files and bytes per index byte, from the partitions that did
    not fill their match budget), but no more than the most a partition that filled it verified
    (a capped class stops at `matches`, however big the partition)."""
    free = [r for r in rows if not r["truncated"]]
    capped = [r for r in rows if r["truncated"]]
    x = sum(r["index_bytes"] for r in free)
    return {"files_per_byte": sum(r["files"] for r in free) / x if x else math.inf,
            "bytes_per_byte": sum(r["bytes"] for r in free) / x if x else math.inf,
            "max_files": max((r["files"] for r in capped), default=math.inf),
            "max_bytes": max((r["bytes"] for r in capped), default=math.inf)}


def best_of_repeats(data: dict) -> dict:
    """One configuration per size and partitions: of its repeats, per class, the measurement
    with the lowest p50 (its work and stats with it)."""
    merged: dict[tuple[str, int], dict] = {}
    for c in data["configs"]:
        key = (c["size"], c["partitions"])
        if key not in merged:
            merged[key] = {**c, "classes": dict(c["classes"])}
            continue
        for cls, m in c["classes"].items():
            kept = merged[key]["classes"].get(cls)
            if kept is None or statistics.median(m["lat"]) < statistics.median(kept["lat"]):
                merged[key]["classes"][cls] = m
    return {**data, "configs": list(merged.values())}


def fit_models(data: dict, cores: float, classes: list[str], quiet: float = 0.5,
               budgets: dict[str, int | None] | None = None) -> dict:
    """Per class: the work model on every partition, the merge model on the merging process's
    CPU per search, and the latency of every configuration from them.

    The merging process (the driver here, an API replica in the service) plans, sends a task to
    every partition, receives and merges their answers: its CPU per search is ``d0 + fan × P``.
    On this machine the simulated nodes share its `cores`:

        latency = wait + merge + answered(work of each partition, on `cores`, the class's budget)

    and on real nodes, each partition with cores of its own, ``wait + merge + slowest partition``
    (equal partitions). The time beyond the merge is fitted per class on its points:

        p50 − merge = wait + scale × answered + crowd × answered × max(0, partitions / cores − 1)

    ``wait`` is what wall time adds to CPU (wake-ups, the trips between processes), so ``hop =
    wait + d0``; ``scale`` how much of a partition's work, measured alone (searches in a row, no
    early stop), it spends inside a search through the pool (0.65-0.95 for the fast classes: the
    alone measurement overstates them, and a fit without it over-predicted them by up to 57%);
    ``crowd`` what more partitions than cores add on this machine (switching between them), a term
    real nodes, one partition each, do not have. A point whose `others` (the cores the rest of
    the machine used while it was measured) is above `quiet` is flagged; `budgets` gives each
    class's match budget for the pool's early stop (None: none)."""
    models = {}
    for cls in classes:
        rows = work_rows(data, cls)
        if not rows:
            continue
        work = fit(rows, WORK_TERMS, "cpu")
        for r in rows:
            r["model"] = apply(work, r)
        points = []
        for c in data["configs"]:
            m = c["classes"].get(cls)
            if not m:
                continue
            mine = [r for r in rows if r["size"] == c["size"] and r["P"] == c["partitions"]]
            t = answered([r["model"] for r in mine], [r["matches"] for r in mine], cores, (budgets or {}).get(cls))
            others = m.get("others", 0.0)
            points.append({"size": c["size"], "P": c["partitions"], "one": 1.0, "partitions": c["partitions"], "t": t,
                           "driver_cpu": m["driver_cpu"], "p50": statistics.median(m["lat"]),
                           "p99": percentile(m["lat"], 99), "runs": len(m["lat"]), "others": others,
                           "quiet": others <= quiet})
        driver = fit(points, LATENCY_TERMS, "driver_cpu")
        for p in points:
            p["driver_model"] = apply(driver, p)
        models[cls] = {"work": work, "driver": driver, "rows": rows, "points": points, "verified": verified_rule(rows)}
    for m in models.values():
        for p in m["points"]:
            p["crowded"] = p["t"] * max(0.0, p["partitions"] / cores - 1.0)
            p["beyond_merge"] = p["p50"] - p["driver_model"]
        time = fit(m["points"], TIME_TERMS, "beyond_merge", scale="p50")
        m["wait"], m["scale"], m["crowd"] = time["one"], time["t"], time["crowded"]
        m["latency"] = {"one": m["wait"] + m["driver"]["one"], "partitions": m["driver"]["partitions"]}
        m["tail"] = statistics.median(p["p99"] / p["p50"] for p in m["points"])
        for p in m["points"]:
            p["model"] = apply(m["latency"], p) + m["scale"] * p["t"] + m["crowd"] * p["crowded"]
            p["model99"] = m["tail"] * p["model"]
    return models


def memory_model(data: dict) -> dict:
    """A searcher's RssAnon = base + per_byte × the shard bytes it maps (least squares)."""
    rows = [{"one": 1.0, "mapped": m["mapped"], "anon": m["anon"]} for c in data["configs"] for m in c["memory"]]
    coef = fit(rows, ["one", "mapped"], "anon")
    raylets = [r for c in data["configs"] for r in c.get("raylets", [])]
    return {"base": coef["one"], "per_byte": coef["mapped"], "rows": rows, "raylet_max": max(raylets, default=0),
            "raylet_min": min(raylets, default=0)}


# ----------------------------------------------------------------------------- predicting


def corpus_facts(data: dict) -> dict:
    """Ratios of the measured corpus that a bigger one of the same kind keeps (of the biggest
    index measured as it is, not served several times)."""
    base = max((s for s in data["sizes"] if s["scale"] == 1), key=lambda s: s["corpus_bytes"])
    return {"index_per_corpus": base["index_bytes"] / base["corpus_bytes"],
            "shard_bytes": base["index_bytes"] / base["shards"]}


def predict(models: dict, facts: dict, corpus_gb: float, nodes: int) -> dict:
    """p50, p99 and work per class on `nodes` real nodes, one partition each, for `corpus_gb` of
    code like the measured corpus: every partition the same, its own cores; latency = hop +
    fan × partitions + scale × the partition's work."""
    index_p = corpus_gb * GB * facts["index_per_corpus"] / nodes
    shards_p = max(1, math.ceil(index_p / facts["shard_bytes"]))
    out = {}
    for cls, m in models.items():
        v = m["verified"]
        row = {"one": 1.0, "shards": shards_p, "partitions": nodes,
               "files": min(v["files_per_byte"] * index_p, v["max_files"]),
               "bytes": min(v["bytes_per_byte"] * index_p, v["max_bytes"])}
        work = apply(m["work"], row)
        p50 = apply(m["latency"], row) + m["scale"] * work
        out[cls] = {"work": work, "p50": p50, "p99": m["tail"] * p50, "files": row["files"], "bytes": row["bytes"]}
    return {"index_per_node": index_p, "shards_per_node": shards_p, "classes": out}


def node_memory(mem: dict, index_per_node: float) -> dict:
    """Memory one searcher node needs: its searcher's RssAnon, its raylet (with the object store
    pages it touched), and the page cache that keeps its whole index in memory (the latencies
    measured here are all with a warm page cache; opening a shard reads all of it once)."""
    anon = mem["base"] + mem["per_byte"] * index_per_node
    return {"anon": anon, "raylet": mem["raylet_max"], "page_cache": index_per_node,
            "total": anon + mem["raylet_max"] + index_per_node}


def nodes_needed(models: dict, facts: dict, mem: dict, corpus_gb: float, target_s: float, which: str,
                 classes: list[str], ram: float, max_nodes: int = 2000) -> tuple[int | None, int]:
    """The fewest nodes whose predicted `which` (p50 or p99) of every class in `classes` is at
    most `target_s` and whose memory fits `ram`; and the fewest by memory alone."""
    by_memory = next((n for n in range(1, max_nodes + 1)
                      if node_memory(mem, corpus_gb * GB * facts["index_per_corpus"] / n)["total"] <= ram), None)
    if by_memory is None:
        return None, max_nodes + 1
    for n in range(by_memory, max_nodes + 1):
        pred = predict(models, facts, corpus_gb, n)["classes"]
        if all(pred[c][which] <= target_s for c in classes if c in pred):
            return n, by_memory
    return None, by_memory
