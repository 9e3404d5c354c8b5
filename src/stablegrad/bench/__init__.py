"""A benchmark to run on your machine: stablegrad's backends against the same models written by hand.

    python -m stablegrad.bench                         # everything installed, default sizes (under a minute)
    stablegrad bench --size small --rounds 1           # a quick check that it all runs
    stablegrad bench --workload W1 --backends numpy,jax

What is timed: one call that returns the value and the gradient of

- W1  `cost = sum(w * logsumexp(x, axis=-1))`, gradient wrt x; x 1000x1000 in float64 and float32;
- W3  an HMM's forward algorithm as `sg.scan`, `alpha_t = logsumexp(alpha_{t-1}[:, None] + log_A,
      axis=0) + log_B[t]`, `cost = logsumexp(alpha_T)`, gradients wrt log_A and log_B; T=1000, K=8;
- W5  a Gaussian-mixture log-likelihood over N=10^6 points and K=5 components
      (`log_softmax` weights, `logsumexp` over components), gradients wrt mu, log_sigma, logits;

by each system, all in one process, side by side:

- `sg numpy`, `sg numba`, `sg jax`: `sg.function(inputs, [cost, *sg.grad(cost, wrt)], backend=...)`
  (those installed; `--backends` chooses);
- `hand NumPy` (always: the baseline), `hand Numba` (a serial `numba.njit` kernel) and
  `hand jax.jit` (`jax.jit(jax.value_and_grad(...))`), where installed: the same formula and
  its gradient written by hand.  Every system takes NumPy arrays and returns NumPy arrays.

How: each system is built and called once (reported as "first call", which includes
compiling), and its results are checked against hand NumPy in float64 (to 1e-9 of each
output's largest entry in float64, 2e-4 in float32).  A system whose results are off is
shown as WRONG and neither timed nor counted in the ratios.  The others are timed in
batches of calls lasting at least 20 ms, one batch per system a round, the systems in turn
(so the machine's drift falls on all alike), for `--rounds` rounds; the table shows the
median ms per call and the ratios to hand NumPy and to the best peer (the fastest correct
hand-written system).  Every library is limited to one thread, as `threads` explains.

The exit status is 0 when every system's results were right, 1 when one's were WRONG or it
failed, 2 on a bad argument.  In Python:

>>> from stablegrad.bench import main
>>> main(["--workload", "W9"])  # doctest: +SKIP
2
"""

from .commandline import add_arguments, command, main
from .runner import SYSTEMS, Row, System, run
from .workloads import Case, cases

__all__ = ["SYSTEMS", "Case", "Row", "System", "add_arguments", "cases", "command", "main", "run"]
