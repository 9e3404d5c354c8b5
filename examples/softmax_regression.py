"""Multinomial logistic regression trained with `softmax_cross_entropy`.

    loss(W, b) = mean_n [ logsumexp(x_n W + b) - (x_n W + b)[y_n] ]

`softmax_cross_entropy(logits, labels)` computes that per row without forming the
softmax, so confident (large) logits neither overflow nor give `log(0)`, and its
gradient is `softmax(logits) - onehot(labels)`, finite for any finite logits.  The
data here are nearly separable, so the logits grow large as training proceeds —
the regime where `-log(softmax(z)[y])` written out eventually returns inf.

Run:  python examples/softmax_regression.py
"""

from __future__ import annotations

import numpy as np

import stablegrad as sg


def build(n_features: int, n_classes: int) -> tuple[sg.Function, sg.Function]:
    """(loss and gradients w.r.t. W, b) and (predicted class) as compiled functions of (X, labels, W, b)."""
    X = sg.matrix("X")
    labels = sg.tensor("labels", shape=(None,), dtype="int64")
    W = sg.tensor("W", shape=(n_features, n_classes))
    b = sg.tensor("b", shape=(n_classes,))
    logits = sg.matmul(X, W) + b
    loss = sg.mean(sg.softmax_cross_entropy(logits, labels))
    train = sg.function([X, labels, W, b], [loss, *sg.grad(loss, [W, b])])
    predict = sg.function([X, W, b], sg.argmax(logits, axis=1))
    return train, predict


def make_data(rng: np.random.Generator, n: int, n_features: int, n_classes: int, spread: float = 4.0):
    centres = spread * rng.standard_normal((n_classes, n_features))
    labels = rng.integers(n_classes, size=n)
    return centres[labels] + rng.standard_normal((n, n_features)), labels


def reference_loss(X, labels, W, b) -> float:
    """The mean cross-entropy in NumPy (max-shifted), an independent check."""
    z = X @ W + b
    z = z - z.max(axis=1, keepdims=True)
    return float(np.mean(np.log(np.exp(z).sum(axis=1)) - z[np.arange(len(labels)), labels]))


def main(
    n: int = 600,
    n_features: int = 5,
    n_classes: int = 4,
    iterations: int = 300,
    learning_rate: float = 0.5,
    seed: int = 0,
) -> dict:
    rng = np.random.default_rng(seed)
    X, labels = make_data(rng, n, n_features, n_classes)
    train, predict = build(n_features, n_classes)
    W, b = np.zeros((n_features, n_classes)), np.zeros(n_classes)
    print(f"softmax regression: {n} points, {n_features} features, {n_classes} classes")
    losses = []
    for i in range(1, iterations + 1):
        loss, g_W, g_b = train(X, labels, W, b)
        losses.append(float(loss))
        W, b = W - learning_rate * g_W, b - learning_rate * g_b
        if i % 50 == 0 or i == 1:
            accuracy = np.mean(predict(X, W, b) == labels)
            print(f"iter {i:4d}  loss {loss:.6f}  accuracy {accuracy:.3f}")
    # scaled up 1000x the weights give huge logits; the loss stays finite and exact
    big_loss, g_W, g_b = train(X, labels, 1000 * W, 1000 * b)
    expected = reference_loss(X, labels, 1000 * W, 1000 * b)
    print(
        f"with weights x1000: loss {big_loss:.6g} (NumPy {expected:.6g}), gradient finite: {bool(np.all(np.isfinite(g_W)))}"
    )
    if not (np.isfinite(big_loss) and np.all(np.isfinite(g_W)) and np.isclose(big_loss, expected, rtol=1e-10)):
        raise AssertionError("softmax_cross_entropy lost accuracy at large logits")
    return {"losses": losses, "accuracy": float(np.mean(predict(X, W, b) == labels)), "W": W, "b": b}


if __name__ == "__main__":
    main()
