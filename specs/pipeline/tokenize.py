"""DAG node 1: turn a tiny corpus into token shards ($ADV_ARTIFACT_DIR/shards/), the output `shards`."""
import json
import os

CORPUS = """the cat sat on the mat . the dog sat on the log . a cat and a dog met on the mat .
the dog saw the cat . the cat saw a bird . a bird sat on the dog ."""

out = os.path.join(os.environ.get("ADV_ARTIFACT_DIR", "artifacts"), "shards")
os.makedirs(out, exist_ok=True)
words = CORPUS.split()
vocab = sorted(set(words))
ids = [vocab.index(w) for w in words]
for i in range(0, len(ids), 16):
    with open(os.path.join(out, f"shard-{i // 16:03d}.json"), "w") as f:
        json.dump(ids[i : i + 16], f)
with open(os.path.join(out, "vocab.json"), "w") as f:
    json.dump(vocab, f)
print(f"tokenized {len(ids)} tokens, vocabulary {len(vocab)}, {len(range(0, len(ids), 16))} shards in {out}")
