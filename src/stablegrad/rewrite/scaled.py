"""Logs of functions that under- or overflow long before their logs do, through their scaled forms.

K_v(x) underflows to 0 past x ≈ 700 and I_v(x) overflows past x ≈ 713, while their logs
(about -x and +x) are ordinary numbers; the exponentially scaled functions kve = kv·eˣ
and ive = iv·e⁻|ˣ| stay finite there, so the log is taken of those and the exponent
added back exactly.
"""

from __future__ import annotations

from ..ops.elementwise import abs, isinf, negative, where
from ..ops.math import Iv, Kv, Log, ive, kve, log
from .engine import Kind, Phase, rewrite
from .patterns import fits, owner

#: a Bessel function's class → its scaled form, and the exponent that the log of the scaled form lacks
_SCALED = {Kv: (kve, negative), Iv: (ive, abs)}


@rewrite(Phase.STABILIZE, Kind.RECOGNITION, Log)
def log_bessel_from_scaled(node):
    """log(kv(v, x)) → log(kve(v, x)) - x, log(iv(v, x)) → log(ive(v, x)) + |x|: finite where kv
    underflows (x > 700 in float64) and iv overflows (|x| > 713)."""
    f = owner(node.inputs[0], Kv, Iv)
    if f is None:
        return None
    scaled, exponent = _SCALED[type(f.op)]
    v, x = f.inputs
    return fits(_finite_x_only(x, f.outputs[0], log(scaled(v, x)) + exponent(x)), node)


def _finite_x_only(x, written, scaled):
    """`scaled` where x is finite; at x = ±inf (the scaled function of SciPy is NaN there, and the
    sum would be inf - inf) the log of the function as written, read through a `where` so that
    the rule does not match it again."""
    infinite = isinf(x)
    return where(infinite, log(where(infinite, written, 1.0)), scaled)


RULES = (log_bessel_from_scaled,)
