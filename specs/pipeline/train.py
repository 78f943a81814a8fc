"""DAG node 2: fit bigram counts over the shards of `tokenize` ($ADV_INPUT_TOKENS_DIR), one shard per
step, checkpointing each step (resumable), and publish the model as the output `params`."""
import json
import os

tokens_dir = os.environ["ADV_INPUT_TOKENS_DIR"]
ckpt_dir = os.environ.get("ADV_CKPT_DIR", "ckpt")
os.makedirs(ckpt_dir, exist_ok=True)
shards = sorted(f for f in os.listdir(tokens_dir) if f.startswith("shard-"))
steps = [int(d) for d in os.listdir(ckpt_dir) if d.isdigit()]
step = max(steps) if steps else 0
counts = json.load(open(os.path.join(ckpt_dir, str(step), "counts.json"))) if steps else {}
print(f"starting at step {step} of {len(shards)}")
while step < len(shards):
    ids = json.load(open(os.path.join(tokens_dir, shards[step])))
    for a, b in zip(ids, ids[1:]):
        counts.setdefault(str(a), {}).setdefault(str(b), 0)
        counts[str(a)][str(b)] += 1
    step += 1
    tmp = os.path.join(ckpt_dir, f"{step}.tmp")
    os.makedirs(tmp, exist_ok=True)
    json.dump(counts, open(os.path.join(tmp, "counts.json"), "w"))
    os.rename(tmp, os.path.join(ckpt_dir, str(step)))  # the rename commits the checkpoint
out = os.path.join(os.environ.get("ADV_ARTIFACT_DIR", "artifacts"), "params")
os.makedirs(out, exist_ok=True)
vocab = json.load(open(os.path.join(tokens_dir, "vocab.json")))
json.dump({"vocab": vocab, "counts": counts}, open(os.path.join(out, "bigrams.json"), "w"))
print(f"trained on {step} shards; params in {out}")
