"""Regenerates metric-lines.json from CASES with the package's log() (run it after changing log):

    .venv/bin/python runtime/python/tests/gen_metric_lines.py

test_metrics.py checks log() still writes these exact lines; runtime/python/metric-lines.test.ts
checks runtime/metrics.ts reads each as ``event``. The fixture is the contract both sides share.
"""

import json
import os
import tempfile
import time
from unittest import mock

import support  # noqa: F401
from adventuretime.metrics import log

HERE = os.path.dirname(os.path.abspath(__file__))
FIXTURE = os.path.join(HERE, "metric-lines.json")
#: The time every fixture line carries (log() takes time.time()).
TIME = 1764250000.25

# metrics values: numbers, or {"float": "nan" | "inf" | "-inf"} for what JSON cannot spell.
CASES = [
    {"what": "one metric", "step": 0, "metrics": {"loss": 0.5}},
    {"what": "several, ints made floats", "step": 120, "metrics": {"loss": 0.52, "lr": 0.001, "tokens": 3}},
    {"what": "a bool is a number", "step": 1, "metrics": {"done": True}},
    {"what": "names with / and . and unicode", "step": 7, "metrics": {"eval/loss": 1.25, "acc.top1": 0.9, "λ": 2}},
    {"what": "tiny and huge", "step": 2, "metrics": {"a": 1e-300, "b": 1.5e300, "c": -0.0}},
    {"what": "nan and inf dropped, the rest kept", "step": 3, "metrics": {"loss": {"float": "nan"}, "acc": 0.75, "g": {"float": "inf"}}},
    {"what": "nothing finite: no line", "step": 4, "metrics": {"loss": {"float": "nan"}, "g": {"float": "-inf"}}},
    {"what": "the largest step both sides hold exactly", "step": 9007199254740991, "metrics": {"loss": 0.1}},
]


def value(v):
    return float(v["float"]) if isinstance(v, dict) else v


def line_for(case):
    """The line log() writes for ``case`` at TIME (None: it writes none)."""
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "metrics.jsonl")
        env = {"ADV_METRICS_FILE": path, "ADV_PROCESS_ID": "0"}
        with mock.patch.dict(os.environ, env), mock.patch.object(time, "time", return_value=TIME):
            log(case["step"], **{k: value(v) for k, v in case["metrics"].items()})
        if not os.path.exists(path):
            return None
        with open(path, encoding="utf-8") as f:
            text = f.read()
    assert text.endswith("\n") and text.count("\n") == 1, text
    return text[:-1]


def event_for(line):
    if line is None:
        return None
    o = json.loads(line)
    return {"step": o["step"], "time": o["time"], "metrics": o["metrics"]}


def main():
    out = []
    for case in CASES:
        line = line_for(case)
        out.append({**case, "line": line, "event": event_for(line)})
    with open(FIXTURE, "w", encoding="utf-8") as f:
        json.dump(out, f, indent=1, ensure_ascii=False)
        f.write("\n")
    print(f"wrote {len(out)} cases to {FIXTURE}")


if __name__ == "__main__":
    main()
