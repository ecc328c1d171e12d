"""The capacity model of bench/capacity.py (bench/capacity_model.py), on points made from known constants.

The measuring needs a cluster and minutes; the fitting and predicting are plain functions. Given
points computed exactly from a set of constants, the fit must find those constants again (and no
negative cost where the data cannot support a term), and the prediction must be the formula of
docs/capacity.md applied to them.
"""

from __future__ import annotations

import math
import random
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))

from capacity_model import (  # noqa: E402
    GB,
    answered,
    fit,
    fit_models,
    nodes_needed,
    predict,
    verified_rule,
)

#: The constants the synthetic cluster runs with: CPU seconds per search of a partition and the
#: latency terms, per class.
TRUTH = {
    "selective": {"work": {"one": 1.5e-3, "shards": 2e-4, "files": 0.0, "bytes": 0.0},
                  "latency": {"one": 2e-3, "partitions": 8e-4}},
    "scanning": {"work": {"one": 2e-3, "shards": 1e-4, "files": 40e-6, "bytes": 1.6e-9},
                 "latency": {"one": 3e-3, "partitions": 1.2e-3}},
}
CORES = 2.0
#: What a wall time adds to the CPU of the merging process and the partitions (the same for every class).
WAIT = 5e-4


def close(a: float, b: float, rel: float = 1e-6) -> bool:
    return math.isclose(a, b, rel_tol=rel, abs_tol=1e-12)


@pytest.mark.parametrize(
    ("truth", "terms"),
    [
        ({"one": 2e-3, "shards": 3e-4, "bytes": 1.7e-9}, ["one", "shards", "bytes"]),
        ({"one": 5e-3, "shards": 0.0, "bytes": 2e-9}, ["one", "shards", "bytes"]),
        ({"one": 1e-3, "partitions": 9e-4}, ["one", "partitions"]),
    ],
)
def test_fit_finds_the_constants_the_points_were_made_with(truth, terms):
    rng = random.Random(1)
    rows = []
    for _ in range(30):
        row = {"one": 1.0, "shards": rng.randint(1, 40), "bytes": rng.uniform(0, 2e8),
               "partitions": rng.choice([1, 2, 4, 8])}
        row["y"] = sum(c * row[t] for t, c in truth.items())
        rows.append(row)
    got = fit(rows, terms, "y")
    for t in terms:
        assert close(got[t], truth.get(t, 0.0)), (t, got)


def test_fit_never_gives_a_negative_cost():
    """Points that fall with a term (noise, or a cost the data cannot show) make it 0, not negative."""
    rows = [{"one": 1.0, "x": x, "y": 10.0 - 0.01 * x} for x in range(1, 20)]
    got = fit(rows, ["one", "x"], "y")
    assert got["x"] == 0.0
    assert 9.8 < got["one"] < 10.0


@pytest.mark.parametrize(
    ("works", "matches", "cores", "budget", "expected"),
    [
        ([0.010], [5], 2, 100, 0.010),  # one partition
        ([0.010, 0.030], [0, 0], 2, 100, 0.030),  # a core each: the slowest
        ([0.010, 0.030], [150, 0], 2, 100, 0.010),  # the first answer fills the budget: the rest is cancelled
        ([0.010, 0.030], [150, 0], 2, None, 0.030),  # no early stop (an identifier query): every partition answers
        ([0.010, 0.030], [60, 60], 2, 100, 0.030),  # the budget fills only with the second answer
        ([0.010, 0.010, 0.010, 0.010], [0] * 4, 2, 100, 0.020),  # 4 partitions on 2 cores: half a core each
        ([0.010, 0.030, 0.030, 0.030], [0] * 4, 2, 100, 0.050),  # 4 share 2 cores for 20 ms, then 3 for 30
        ([0.010, 0.030, 0.030, 0.030], [200, 0, 0, 0], 2, 100, 0.020),  # cancelled once the first one is in
        ([0.010] * 20, [0] * 20, 20, 100, 0.010),  # real nodes: a core each
    ],
)
def test_answered_is_when_the_pool_has_its_answer(works, matches, cores, budget, expected):
    assert close(answered(works, matches, cores, budget), expected, rel=1e-3)


def test_a_capped_class_verifies_no_more_in_a_big_partition_than_in_a_small_one():
    rows = [
        {"index_bytes": 1e9, "files": 100, "bytes": 5e6, "truncated": False},
        {"index_bytes": 1e9, "files": 300, "bytes": 9e6, "truncated": True},
        {"index_bytes": 2e8, "files": 250, "bytes": 7e6, "truncated": True},
    ]
    rule = verified_rule(rows)
    assert close(rule["files_per_byte"], 100 / 1e9) and close(rule["bytes_per_byte"], 5e6 / 1e9)
    assert rule["max_files"] == 300 and rule["max_bytes"] == 9e6
    uncapped = verified_rule([r for r in rows if not r["truncated"]])
    assert uncapped["max_bytes"] == math.inf


def synthetic_run(scale: dict[str, float] | None = None, crowd: dict[str, float] | None = None) -> dict:
    """What bench/capacity.py would save for a cluster that runs exactly by `TRUTH`: two sizes,
    1 2 4 8 partitions, every partition's work and every search's wall time from the constants;
    per class, a search through the pool spends `scale` of the work measured alone (1 unless
    given), and `crowd` × the work's time more times the partitions beyond the cores per core
    (0 unless given)."""
    configs = []
    for size, shards, index_bytes in (("1g", 12, 1.2e9), ("1g×2", 24, 2.4e9)):
        for partitions in (1, 2, 4, 8):
            part_shards = [shards // partitions + (1 if i < shards % partitions else 0) for i in range(partitions)]
            part_bytes = [index_bytes * s / shards for s in part_shards]
            classes = {}
            for cls, truth in TRUTH.items():
                parts, cpu = [], []
                rng = random.Random(f"{size} {partitions}")
                for s, b in zip(part_shards, part_bytes, strict=True):
                    # what a partition verifies varies with its files, not only its size (as it
                    # does in a real index): so the fit can tell the terms' costs apart
                    files, verified = (b / 2e6 * rng.uniform(0.5, 1.5), b / 40 * rng.uniform(0.5, 1.5)) \
                        if cls == "scanning" else (0, 0)
                    parts.append({"files": files, "bytes": verified, "truncated": False})
                    cpu.append(sum(c * {"one": 1.0, "shards": s, "files": files, "bytes": verified}[t]
                                   for t, c in truth["work"].items()))
                merge = truth["latency"]["one"] - WAIT + truth["latency"]["partitions"] * partitions
                alone = answered(cpu, [0] * partitions, CORES, None)
                over = max(0.0, partitions / CORES - 1)
                lat = WAIT + merge + alone * ((scale or {}).get(cls, 1.0) + (crowd or {}).get(cls, 0.0) * over)
                classes[cls] = {"lat": [lat * f for f in (0.98, 1.0, 1.0, 1.02, 1.3)], "direct_cpu": cpu,
                                "parts": parts, "driver_cpu": merge, "others": 0.0}
            configs.append({"size": size, "partitions": partitions, "part_shards": part_shards,
                            "part_bytes": part_bytes, "classes": classes})
    return {"sizes": [{"label": "1g", "scale": 1, "index_bytes": 1.2e9, "corpus_bytes": 1e9, "shards": 12}],
            "configs": configs}


def test_the_fitted_model_is_the_one_the_cluster_ran_by():
    models = fit_models(synthetic_run(), CORES, list(TRUTH))
    for cls, truth in TRUTH.items():
        m = models[cls]
        for part in ("work", "latency"):
            for t, c in truth[part].items():
                assert close(m[part][t], c, rel=1e-4), (cls, part, t, m[part])
        for p in m["points"]:
            assert close(p["model"], p["p50"], rel=1e-4), (cls, p)
        assert close(m["tail"], 1.3)  # p99 of 5 runs is the slowest, 1.3 × the median
        assert close(m["wait"], WAIT, rel=1e-4)


def test_the_fit_finds_how_much_of_the_work_alone_a_pool_search_spends():
    """A cluster whose searches through the pool spend 0.7 of the work measured alone, and 0.1
    of it more for each core's worth of partitions beyond the cores: the fit finds both and every
    point again; the prediction for real nodes (cores of their own) scales the work and has no
    crowding."""
    run = synthetic_run(scale={"selective": 0.7, "scanning": 0.9}, crowd={"selective": 0.1, "scanning": 0.0})
    models = fit_models(run, CORES, list(TRUTH))
    for cls, (scale, crowd) in {"selective": (0.7, 0.1), "scanning": (0.9, 0.0)}.items():
        m = models[cls]
        assert close(m["scale"], scale, rel=1e-4), (cls, m["scale"])
        assert abs(m["crowd"] - crowd) < 1e-6 and close(m["wait"], WAIT, rel=1e-3), (cls, m["crowd"], m["wait"])
        assert all(close(p["model"], p["p50"], rel=1e-4) for p in m["points"]), cls
    facts = {"index_per_corpus": 1.2, "shard_bytes": 1e8}
    plain = predict(fit_models(synthetic_run(), CORES, list(TRUTH)), facts, 100, 20)["classes"]["selective"]
    scaled = predict(models, facts, 100, 20)["classes"]["selective"]
    assert close(scaled["work"], plain["work"], rel=1e-4)
    assert close(scaled["p50"], plain["p50"] - 0.3 * plain["work"], rel=1e-4)


def test_the_prediction_is_the_formula_on_real_nodes():
    """20 nodes, one partition each with its own cores: hop + fan × 20 + the partition's work,
    its size a twentieth of the index (index = 1.2 × corpus here, 100 MB shards)."""
    models = fit_models(synthetic_run(), CORES, list(TRUTH))
    facts = {"index_per_corpus": 1.2, "shard_bytes": 1e8}
    got = predict(models, facts, 100, 20)
    index_p = 100 * GB * 1.2 / 20
    assert close(got["index_per_node"], index_p) and got["shards_per_node"] == 60
    t = TRUTH["scanning"]
    rule = models["scanning"]["verified"]
    work = (t["work"]["one"] + t["work"]["shards"] * 60 + t["work"]["files"] * rule["files_per_byte"] * index_p
            + t["work"]["bytes"] * rule["bytes_per_byte"] * index_p)
    p50 = t["latency"]["one"] + t["latency"]["partitions"] * 20 + work
    assert close(got["classes"]["scanning"]["work"], work, rel=1e-4)
    assert close(got["classes"]["scanning"]["p50"], p50, rel=1e-4)
    assert close(got["classes"]["scanning"]["p99"], 1.3 * p50, rel=1e-4)


def test_nodes_needed_is_the_fewest_that_meet_the_target_and_fit_in_memory():
    models = fit_models(synthetic_run(), CORES, list(TRUTH))
    facts = {"index_per_corpus": 1.2, "shard_bytes": 1e8}
    mem = {"base": 100e6, "per_byte": 0.0, "raylet_max": 100e6}
    classes = list(TRUTH)

    def p50(n):
        return max(predict(models, facts, 100, n)["classes"][c]["p50"] for c in classes)

    target = p50(30)
    n, by_memory = nodes_needed(models, facts, mem, 100, target, "p50", classes, ram=24 * 2**30)
    assert by_memory == 5  # 120 GB of index, + 200 MB a node, in 24 GiB nodes
    assert n is not None and p50(n) <= target and (n == by_memory or p50(n - 1) > target)
    assert nodes_needed(models, facts, mem, 100, 1e-3, "p50", classes, ram=24 * 2**30)[0] is None  # under hop + fan


def test_a_point_measured_while_the_machine_was_busy_is_flagged_not_modelled_otherwise():
    run = synthetic_run()
    run["configs"][3]["classes"]["selective"]["others"] = 1.5
    models = fit_models(run, CORES, list(TRUTH))
    flags = {(p["size"], p["P"]): p["quiet"] for p in models["selective"]["points"]}
    assert flags.pop(("1g", 8)) is False and all(flags.values())
    assert close(models["selective"]["wait"], WAIT, rel=1e-4)
