"""DAG node 3: sample greedy rollouts from the model of `train` ($ADV_INPUT_PARAMS_DIR) and publish
them as the output `samples`."""
import json
import os

model = json.load(open(os.path.join(os.environ["ADV_INPUT_PARAMS_DIR"], "bigrams.json")))
vocab, counts = model["vocab"], model["counts"]
out = os.path.join(os.environ.get("ADV_ARTIFACT_DIR", "artifacts"), "samples")
os.makedirs(out, exist_ok=True)
samples = []
for start in ["the", "a"]:
    words, cur = [start], vocab.index(start)
    for _ in range(6):
        nxt = counts.get(str(cur))
        if not nxt:
            break
        cur = int(max(sorted(nxt), key=lambda k: nxt[k]))
        words.append(vocab[cur])
    samples.append(" ".join(words))
    print("rollout:", samples[-1])
json.dump(samples, open(os.path.join(out, "samples.json"), "w"), indent=1)
