"""Shared helpers for the holmes-gpt toy model (tokenizer/model training, reference)."""
import hashlib
import os
import re

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DEFAULT_DATA = os.path.join(REPO_ROOT, "..", "shared", "data", "sherlock-holmes-canon.txt")
DEFAULT_MODEL_DIR = os.path.join(REPO_ROOT, "models", "holmes-gpt")
DATA_SHA256 = "b63894712ecc48a975fea34c957f89a25c677147eba46d0dfb2b29ee18514eaf"
EXPECTED_SECTIONS = 129
EOT = "<|endoftext|>"
EOT_ID = 511
VAL_EVERY = 20   # section i is validation iff i % VAL_EVERY == VAL_OFFSET
VAL_OFFSET = 10

SECTION_RE = re.compile(r"\n(?:[ \t]*\n){3,}")


def sha256_file(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def read_corpus(path=DEFAULT_DATA, check_sha=True):
    if check_sha:
        got = sha256_file(path)
        if got != DATA_SHA256:
            raise SystemExit(f"corpus sha256 mismatch: {got} != {DATA_SHA256}")
    with open(path, encoding="utf-8") as f:
        return f.read()


def split_sections(text):
    """Split on runs of 3+ blank lines. Returns all sections (129 for the canon,
    the last of which is empty because the file ends with blank lines)."""
    secs = SECTION_RE.split(text)
    return secs


def train_val_sections(text):
    """Deterministic split: section index i (0-based, of the 129) goes to
    validation iff i % 20 == 10 (sections 10,30,50,70,90,110); the rest train.
    Empty sections are dropped afterwards."""
    secs = split_sections(text)
    if len(secs) != EXPECTED_SECTIONS:
        raise SystemExit(f"expected {EXPECTED_SECTIONS} sections, got {len(secs)}")
    train, val = [], []
    for i, s in enumerate(secs):
        if not s.strip():
            continue
        (val if i % VAL_EVERY == VAL_OFFSET else train).append(s)
    return train, val
