"""The showcase behind `stablegrad demo`: audit a naive model, then let recognition repair it.

The model is a hidden Markov model written the way it reads on paper: the
transition matrix a softmax written out, the forward algorithm adding
log-probabilities with `log(sum(exp(...)))`.  The demo saves it as a user's file
and audits it as `stablegrad audit` would:

1. as written (recognition off): where it breaks, on which line, and which stable
   primitive fixes it;
2. compiled the default way (recognition on): value and gradient within tolerance;
3. what recognition did, one `explain` line per rewrite.
"""

from __future__ import annotations

import os
import tempfile
import time
from collections import Counter

import stablegrad as sg

from .audit.loader import load_function

MODEL = '''\
import stablegrad as sg


def hmm_loglik(trans_logits, log_b):
    """log p(y): transition logits (K, K), emission log-likelihoods log_b (T, K), uniform start."""
    K = trans_logits.shape[0]
    A = sg.exp(trans_logits) / sg.sum(sg.exp(trans_logits), axis=1, keepdims=True)
    log_alpha = log_b[0] - sg.log(float(K))
    for t in range(1, log_b.shape[0]):
        log_alpha = sg.log(sg.sum(sg.exp(log_alpha[:, None] + sg.log(A)), axis=0)) + log_b[t]
    return sg.log(sg.sum(sg.exp(log_alpha)))
'''

INPUTS = {"trans_logits": "float64[3,3]", "log_b": "float64[6,3]"}


def run_demo(fast: bool = False) -> int:
    started = time.perf_counter()
    dtypes = ("float64",) if fast else ("float64", "float32")
    with tempfile.TemporaryDirectory() as directory:
        path = os.path.join(directory, "hmm.py")
        with open(path, "w") as f:
            f.write(MODEL)
        model = load_function(f"{path}:hmm_loglik")
        print("stablegrad demo: a hidden Markov model written with naive formulas (hmm.py)\n")
        print(_indent(_numbered(MODEL)))
        print("\n1. audited as written: stablegrad audit hmm.py:hmm_loglik --no-recognition\n")
        naive = sg.audit(model, INPUTS, dtypes, recognition=False)
        print(_indent(str(naive)))
        print("\n2. audited as compiled by default (recognition on): stablegrad audit hmm.py:hmm_loglik\n")
        repaired = sg.audit(model, INPUTS, dtypes)
        print(_indent(str(repaired)))
    print("\n3. what recognition did (sg.explain):\n")
    print(_indent(_rewrites(repaired.rewrites)))
    print(f"\n(demo ran in {time.perf_counter() - started:.1f} s)")
    return 0 if (not naive.ok and repaired.ok) else 1


def _numbered(source: str) -> str:
    return "\n".join(f"{i:2d}  {line}" for i, line in enumerate(source.splitlines(), 1))


def _rewrites(lines: list[str]) -> str:
    """explain lines, a rewrite repeated at the same line (an unrolled loop) shown once with its count."""
    counts = Counter(lines)
    shown = []
    for line in dict.fromkeys(lines):
        shown.append(line + (f"   ×{counts[line]}" if counts[line] > 1 else ""))
    return "\n".join(shown) or "no rewrites"


def _indent(text: str) -> str:
    return "\n".join("    " + line if line else "" for line in text.rstrip().splitlines())
