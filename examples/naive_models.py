"""Models to audit: the same losses written naively and with the stable primitives.

    stablegrad audit examples/naive_models.py:mixture_naive --input x=float64[4] --input log_w=float64[3] --no-recognition
    stablegrad audit examples/naive_models.py:mixture_stable --input x=float64[4] --input log_w=float64[3]

The naive mixture log-likelihood overflows or underflows once the log-weights or the
data are large (the audit names the line of `log(sum(exp(...)))` and suggests `sg.logsumexp`); compiled with
recognition on (the default) it is rewritten into the stable form automatically.
"""

from __future__ import annotations

import stablegrad as sg

MEANS = (-2.0, 0.0, 3.0)


def _log_density(x):
    return -0.5 * (x[:, None] - sg.constant(MEANS)[None, :]) ** 2  # (N, K) unnormalised Gaussian log-densities


def mixture_naive(x, log_w):
    return sg.sum(sg.log(sg.sum(sg.exp(log_w[None, :] + _log_density(x)), axis=1)))


def mixture_stable(x, log_w):
    return sg.sum(sg.logsumexp(log_w[None, :] + _log_density(x), axis=1))


def softmax_nll_naive(logits):
    probs = sg.exp(logits) / sg.sum(sg.exp(logits), axis=1, keepdims=True)
    return -sg.sum(sg.log(probs[:, 0]))


def softmax_nll_stable(logits):
    return -sg.sum(sg.log_softmax(logits, axis=1)[:, 0])
