"""The JAX backend (optional extra: `pip install stablegrad[jax]`); imported only for `backend="jax"`."""

from .lowerings import UFUNCS
from .program import DATA_AXIS, Program, check_shard
from .trace import LOWERINGS, Plan, evaluate, lowering_for, lowering_of
from .whole import runs_whole
