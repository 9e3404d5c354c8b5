"""Equality saturation (egglog) against the hand-written recognition rules, measured.

    pip install egglog                                   # not a dependency of stablegrad
    python benchmarks/egraph_probe.py PATH/TO/herbie/suite
    python benchmarks/egraph_probe.py PATH/TO/herbie/suite --sizes 100,1000,10000 --repeat 3

PATH/TO/herbie/suite is Herbie's benchmark suite (the `bench/` tree of FPCore files); the
FPCore reader `fpcore.py` is looked for next to it (its parent directory) unless
`--fpcore` names it.  The script answers one question of issue 18: would equality
saturation over a small exp/log theory serve the family better than rules?

It encodes a theory of about thirty rewrites (the identities that recognition implements
for log1p, expm1, softplus, log-sigmoid, sigmoid, logaddexp, log1mexp and the hyperbolic
functions, plus commutativity and associativity of + and * so that written orders match)
with an extraction cost under which exp and log are dear and stable primitives cheap.
Then, for every FPCore formula of the exp/log/hyperbolic family whose operators the theory
has, it times

- egglog: build the term, run the theory to saturation (at most `--iterations` rounds or
  `--node-limit` e-nodes), extract the cheapest term;
- stablegrad: `optimize([out], inputs, recognition=True)` on the same formula built from
  `sg.scalar` inputs (building the graph is not timed);

each the median of `--repeat` fresh runs, and counts how often each finds a stable form:
egglog when the extracted term is cheaper than the written one, stablegrad when a
recognition rewrite is in the change log.  Last, both are timed on model-sized graphs
(a sum of n terms `log(1 + exp(a_i * x))`, about five nodes a term) and the slope of
log(time) against log(nodes) is fitted: 1 is linear.
"""

from __future__ import annotations

import argparse
import importlib.util
import math
import re
import statistics
import sys
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path

from egglog import EGraph, Expr, StringLike, f64, f64Like, function, method, rewrite, ruleset, var, vars_

import stablegrad as sg
from stablegrad.rewrite.engine import ChangeLog, Kind
from stablegrad.rewrite.pipeline import optimize

# --------------------------------------------------------------------------- the theory


class Num(Expr):
    """A real-valued term."""

    def __init__(self, value: f64Like) -> None: ...

    @classmethod
    def var(cls, name: StringLike) -> Num: ...

    @method(cost=1)
    def __add__(self, other: Num) -> Num: ...

    @method(cost=1)
    def __sub__(self, other: Num) -> Num: ...

    @method(cost=1)
    def __mul__(self, other: Num) -> Num: ...

    @method(cost=2)
    def __truediv__(self, other: Num) -> Num: ...

    @method(cost=1)
    def __neg__(self) -> Num: ...


# Naive exponentials and logarithms are dear, stable primitives cheap: a term that trades
# log(1 + exp(x)) (cost 23 with x) for softplus(x) (3) is what extraction should prefer.
@function(cost=10)
def exp(x: Num) -> Num: ...


@function(cost=10)
def log(x: Num) -> Num: ...


@function(cost=10)
def pow_(x: Num, y: Num) -> Num: ...


@function(cost=2)
def sqrt(x: Num) -> Num: ...


@function(cost=1)
def fabs(x: Num) -> Num: ...


@function(cost=3)
def log1p(x: Num) -> Num: ...


@function(cost=3)
def expm1(x: Num) -> Num: ...


@function(cost=2)
def softplus(x: Num) -> Num: ...


@function(cost=2)
def log_sigmoid(x: Num) -> Num: ...


@function(cost=2)
def sigmoid(x: Num) -> Num: ...


@function(cost=2)
def logaddexp(x: Num, y: Num) -> Num: ...


@function(cost=2)
def log1mexp(x: Num) -> Num: ...


@function(cost=3)
def sinh(x: Num) -> Num: ...


@function(cost=3)
def cosh(x: Num) -> Num: ...


@function(cost=3)
def tanh(x: Num) -> Num: ...


STABLE = ("log1p", "expm1", "softplus", "log_sigmoid", "sigmoid", "logaddexp", "log1mexp", "sinh", "cosh", "tanh")

a, b, c, x = vars_("a b c x", Num)
k = var("k", f64)
ONE, HALF, TWO = Num(1.0), Num(0.5), Num(2.0)
NEG_A = -a

AC_RULES = [
    rewrite(a + b).to(b + a),
    rewrite((a + b) + c).to(a + (b + c)),
    rewrite(a + (b + c)).to((a + b) + c),
    rewrite(a * b).to(b * a),
    rewrite((a * b) * c).to(a * (b * c)),
    rewrite(a * (b * c)).to((a * b) * c),
]
NORMAL_RULES = [
    rewrite(a - b).to(a + -b),
    rewrite(-NEG_A).to(a),
    rewrite(-Num(k)).to(Num(-k)),
    rewrite(a * ONE).to(a),
    rewrite(a + Num(0.0)).to(a),
]
RECOGNITION_RULES = [
    rewrite(log(ONE + x)).to(log1p(x)),
    rewrite(exp(x) + Num(-1.0)).to(expm1(x)),
    rewrite(log(exp(x))).to(x),
    rewrite(log1p(expm1(x))).to(x),
    rewrite(exp(a) * exp(b)).to(exp(a + b)),
    rewrite(log1p(exp(x))).to(softplus(x)),
    rewrite(-softplus(-x)).to(log_sigmoid(x)),
    rewrite(log(exp(a) + exp(b))).to(logaddexp(a, b)),
    rewrite(exp(a) / (exp(a) + exp(b))).to(sigmoid(a - b)),
    rewrite(ONE / (ONE + exp(-x))).to(sigmoid(x)),
    rewrite(ONE + -sigmoid(x)).to(sigmoid(-x)),
    rewrite(log(sigmoid(x))).to(log_sigmoid(x)),
    rewrite(log1p(-exp(x))).to(log1mexp(x)),
    rewrite(log(-expm1(x))).to(log1mexp(x)),
    rewrite((exp(x) + -exp(-x)) / TWO).to(sinh(x)),
    rewrite((exp(x) + -exp(-x)) * HALF).to(sinh(x)),
    rewrite((exp(x) + exp(-x)) / TWO).to(cosh(x)),
    rewrite((exp(x) + exp(-x)) * HALF).to(cosh(x)),
    rewrite((exp(x) + -exp(-x)) / (exp(x) + exp(-x))).to(tanh(x)),
    rewrite((ONE + -exp(-(TWO * x))) / (ONE + exp(-(TWO * x)))).to(tanh(x)),
]
THEORY = ruleset(*AC_RULES, *NORMAL_RULES, *RECOGNITION_RULES, name="explog")
THEORY_NO_AC = ruleset(*NORMAL_RULES, *RECOGNITION_RULES, name="explog_no_ac")
N_REWRITES = len(AC_RULES) + len(NORMAL_RULES) + len(RECOGNITION_RULES)


def saturate(term: Num, rules, iterations: int, node_limit: int) -> tuple[Num, int, int, int, bool]:
    """(cheapest term, its cost, the written term's cost, rounds run, saturated) in a fresh e-graph."""
    egraph = EGraph()
    root = egraph.let("root", term)
    written_cost = egraph.extract(root, include_cost=True)[1]
    rounds, saturated = 0, False
    while rounds < iterations:
        rounds += 1
        if not egraph.run(1, ruleset=rules).updated:
            saturated = True
            break
        if sum(n for _, n in egraph.all_function_sizes()) > node_limit:
            break
    best, cost = egraph.extract(root, include_cost=True)
    return best, cost, written_cost, rounds, saturated


# --------------------------------------------------------------------------- FPCore -> both


EXPLOG_OPS = {"exp", "expm1", "log", "log1p", "sinh", "cosh", "tanh", "exp2", "log2", "log10", "erf", "erfc"}
EGG_UNARY: dict[str, Callable[[Num], Num]] = {
    "exp": exp,
    "log": log,
    "log1p": log1p,
    "expm1": expm1,
    "sinh": sinh,
    "cosh": cosh,
    "tanh": tanh,
    "sqrt": sqrt,
    "fabs": fabs,
    "neg": lambda u: -u,
}
EGG_BINARY: dict[str, Callable[[Num, Num], Num]] = {
    "+": lambda u, v: u + v,
    "-": lambda u, v: u - v,
    "*": lambda u, v: u * v,
    "/": lambda u, v: u / v,
    "pow": pow_,
}
SG_UNARY = {
    "exp": sg.exp,
    "log": sg.log,
    "log1p": sg.log1p,
    "expm1": sg.expm1,
    "sinh": sg.sinh,
    "cosh": sg.cosh,
    "tanh": sg.tanh,
    "sqrt": sg.sqrt,
    "fabs": sg.abs,
    "neg": lambda u: -u,
}
SG_BINARY = {
    "+": lambda u, v: u + v,
    "-": lambda u, v: u - v,
    "*": lambda u, v: u * v,
    "/": lambda u, v: u / v,
    "pow": lambda u, v: u**v,
}
CONSTANTS = {"PI": math.pi, "E": math.e, "LN2": math.log(2), "LN10": math.log(10), "SQRT2": math.sqrt(2)}


def load_fpcore(path: Path):
    spec = importlib.util.spec_from_file_location("fpcore", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules["fpcore"] = module
    spec.loader.exec_module(module)
    return module


def constant(node) -> float | None:
    if node.op == "num":
        return float(node.value)
    if node.op == "const":
        return CONSTANTS.get(node.name)
    return None


def missing_ops(fc, body) -> set[str]:
    ops = fc.ops_used(body)
    return {op for op in ops if op not in EGG_UNARY and op not in EGG_BINARY and op not in CONSTANTS}


def translate(fc, body, unary, binary, leaf, number):
    """`body` rebuilt bottom-up through the given constructors (one per DAG node)."""
    val: dict[int, object] = {}
    for n in fc.walk(body):
        args = [val[id(m)] for m in n.args]
        if n.op == "var":
            val[id(n)] = leaf(n.name)
        elif n.op in ("num", "const"):
            val[id(n)] = number(constant(n))
        elif len(args) == 1:
            val[id(n)] = unary[n.op](args[0])
        else:
            val[id(n)] = binary[n.op](*args)
    return val[id(body)]


def family(fc, suite: Path):
    """[(name, body)] of the exp/log/hyperbolic formulas, and how many were read."""
    found, read = [], 0
    for path in sorted(suite.rglob("*.fpcore")):
        cores = fc.read_cores(path.read_text(), "bench/" + path.relative_to(suite).as_posix())
        library = {core.ident: core for core in cores if core.ident}
        for core in cores:
            read += 1
            try:
                body, _ = fc.normalize(core, library)
            except fc.Unsupported:
                continue
            if core.arg_names and fc.ops_used(body) & EXPLOG_OPS:
                found.append((str(core.name), body))
    return found, read


# --------------------------------------------------------------------------- timing


def median_ms(fn: Callable[[], object], repeat: int) -> tuple[float, object]:
    times, result = [], None
    for _ in range(repeat):
        started = time.perf_counter()
        result = fn()
        times.append((time.perf_counter() - started) * 1e3)
    return statistics.median(times), result


def time_rules(build: Callable[[], tuple[list, object]], repeat: int) -> tuple[float, ChangeLog]:
    """Median ms of `optimize` on fresh graphs (the graph is built outside the clock)."""
    times, log = [], ChangeLog()
    for _ in range(repeat):
        inputs, out = build()
        log = ChangeLog()
        started = time.perf_counter()
        optimize([out], inputs, recognition=True, log=log)
        times.append((time.perf_counter() - started) * 1e3)
    return statistics.median(times), log


def one_line(term: Num, width: int = 150) -> str:
    text = " ".join(repr(term).split())
    return text if len(text) <= width else text[: width - 3] + "..."


def primitives(text: str) -> dict[str, int]:
    return {p: len(re.findall(rf"\b{p}\(", text)) for p in STABLE}


def summary(xs: list[float]) -> str:
    return f"mean {statistics.fmean(xs):8.2f}  median {statistics.median(xs):8.2f}  max {max(xs):8.2f} ms"


def formulas(args, fc) -> None:
    found, read = family(fc, args.suite)
    covered, skipped = [], {}
    for name, body in found:
        lacking = missing_ops(fc, body)
        if lacking:
            for op in lacking:
                skipped[op] = skipped.get(op, 0) + 1
        else:
            covered.append((name, body))
    print(f"{read} FPCore benchmarks read; {len(found)} in the exp/log/hyperbolic family; ", end="")
    print(f"{len(covered)} covered by the theory ({N_REWRITES} rewrites)")
    print("  skipped for: " + ", ".join(f"{op} {n}" for op, n in sorted(skipped.items(), key=lambda t: -t[1])))

    egg_ms, rule_ms, rows = [], [], []
    unsaturated = 0
    for name, body in covered:
        names = sorted(fc.depends_on(body))

        def egg_run(body=body):
            term = translate(fc, body, EGG_UNARY, EGG_BINARY, Num.var, Num)
            return saturate(term, THEORY, args.iterations, args.node_limit)

        def sg_build(body=body, names=names):
            inputs = {n: sg.scalar(n) for n in names}
            return list(inputs.values()), fc.build_stablegrad(body, inputs)

        t_egg, (best, cost, written_cost, rounds, saturated) = median_ms(egg_run, args.repeat)
        t_rules, log = time_rules(sg_build, args.repeat)
        unsaturated += not saturated
        before = primitives(repr(translate(fc, body, EGG_UNARY, EGG_BINARY, Num.var, Num)))
        after = primitives(repr(best))
        egg_found = cost < written_cost and any(after[p] > before[p] for p in STABLE)
        fired = sorted({ch.rule for ch in log.changes if ch.kind is Kind.RECOGNITION})
        egg_ms.append(t_egg)
        rule_ms.append(t_rules)
        rows.append((name, t_egg, t_rules, rounds, saturated, egg_found, fired, one_line(best)))

    print(f"\nper formula ({len(rows)}; median of {args.repeat} fresh runs each)")
    print(f"  egglog build+saturate+extract  {summary(egg_ms)}")
    print(f"  stablegrad optimize            {summary(rule_ms)}")
    t_setup, _ = median_ms(lambda: saturate(Num.var("x"), THEORY, args.iterations, args.node_limit), 5)
    print(f"  egglog on a lone variable (fixed cost of a fresh e-graph with the theory): {t_setup:.2f} ms")
    ratio = [e / r for e, r in zip(egg_ms, rule_ms)]
    print(f"  egglog / optimize: median {statistics.median(ratio):.2f}x, max {max(ratio):.2f}x")
    print(f"  egglog stopped before saturating ({args.iterations} rounds / {args.node_limit} e-nodes): {unsaturated}")

    egg_set = {r[0] for r in rows if r[5]}
    rule_set = {r[0] for r in rows if r[6]}
    print("\nstable form found (egglog: cheaper extraction with a new stable primitive; rules: a recognition fired)")
    print(f"  egglog {len(egg_set)}, rules {len(rule_set)}, both {len(egg_set & rule_set)}, ", end="")
    print(f"egglog only {len(egg_set - rule_set)}, rules only {len(rule_set - egg_set)}, ", end="")
    print(f"neither {len(rows) - len(egg_set | rule_set)}")
    only = Counter(rule for name, *_, fired, _ in rows if name in rule_set - egg_set for rule in fired)
    print("  rules only, by rule: " + ", ".join(f"{rule} {n}" for rule, n in only.most_common()))
    for name, *_, best in rows:
        if name in egg_set - rule_set:
            print(f"  egglog only: {name}: {best}")
    if args.verbose:
        for name, t_egg, t_rules, rounds, saturated, egg_found, fired, best in rows:
            print(f"  {name[:40]:40s} egg {t_egg:7.2f} ms ({rounds}{'' if saturated else '+'} rounds) ", end="")
            print(f"rules {t_rules:7.2f} ms  egg={'Y' if egg_found else '-'} rules={','.join(fired) or '-'}")
            print(f"      {best}")


# --------------------------------------------------------------------------- scaling


def balanced_sum(terms: list):
    """The terms added pairwise (a tree of depth log2 n, as a reduction is written)."""
    while len(terms) > 1:
        terms = [terms[i] + terms[i + 1] if i + 1 < len(terms) else terms[i] for i in range(0, len(terms), 2)]
    return terms[0]


def egg_sum(terms: int) -> Num:
    xv = Num.var("x")
    return balanced_sum([log(ONE + exp(Num.var(f"a{i}") * xv)) for i in range(terms)])


def sg_sum(terms: int):
    xv = sg.scalar("x")
    coefficients = [sg.scalar(f"a{i}") for i in range(terms)]
    return [xv, *coefficients], balanced_sum([sg.log(1.0 + sg.exp(ai * xv)) for ai in coefficients])


def slope(sizes: list[int], times: list[float]) -> float:
    lx = [math.log(s) for s in sizes]
    ly = [math.log(t) for t in times]
    mx, my = statistics.fmean(lx), statistics.fmean(ly)
    return sum((u - mx) * (v - my) for u, v in zip(lx, ly)) / sum((u - mx) ** 2 for u in lx)


def scaling(args) -> None:
    print("\nscaling: n terms log(1 + exp(a_i * x)) added pairwise, 5 nodes a term (median of repeats)")
    print(f"  {'nodes':>6s} {'egglog AC':>12s} {'egglog no AC':>13s} {'optimize':>10s}   rounds AC / no AC")
    sizes, rows = [], []
    for nodes in args.sizes:
        terms = max(1, nodes // 5)
        runs = max(1, args.repeat if nodes <= 1000 else 1)
        limit = args.node_limit_scaling * nodes

        def egg_ac(terms=terms, limit=limit):
            return saturate(egg_sum(terms), THEORY, args.iterations, limit)

        def egg_plain(terms=terms, limit=limit):
            return saturate(egg_sum(terms), THEORY_NO_AC, args.iterations, limit)

        t_ac, (_, cost_ac, _, r_ac, s_ac) = median_ms(egg_ac, runs)
        t_plain, (_, cost, _, r_plain, s_plain) = median_ms(egg_plain, runs)
        xv = Num.var("x")
        stable = balanced_sum([softplus(Num.var(f"a{i}") * xv) for i in range(terms)])
        best_cost = EGraph().extract(stable, include_cost=True)[1]
        assert cost == best_cost  # every term became softplus
        t_rules, log = time_rules(lambda terms=terms: sg_sum(terms), runs)
        assert sum(ch.rule == "softplus_from_log1p_exp" for ch in log.changes) == terms
        sizes.append(5 * terms)
        rows.append((t_ac, t_plain, t_rules))
        flags = f"{r_ac}{'' if s_ac else '+'} / {r_plain}{'' if s_plain else '+'}"
        flags += "" if cost_ac == best_cost else f"  (AC extraction cost {cost_ac}, best {best_cost})"
        print(f"  {5 * terms:6d} {t_ac:10.1f}ms {t_plain:11.1f}ms {t_rules:8.1f}ms   {flags}")
    if len(sizes) > 1:
        names = ("egglog AC", "egglog no AC", "optimize")
        fitted = ", ".join(f"{n} {slope(sizes, [r[i] for r in rows]):.2f}" for i, n in enumerate(names))
        print(f"  fitted exponent (log-log slope): {fitted}")
    print("  (+ = stopped by the round or e-node limit before saturating)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("suite", type=Path, help="Herbie's benchmark suite (directory of .fpcore files)")
    parser.add_argument("--fpcore", type=Path, help="the FPCore reader module (default: fpcore.py beside the suite)")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--iterations", type=int, default=12, help="saturation rounds at most")
    parser.add_argument("--node-limit", type=int, default=20_000, help="e-nodes at most, per formula")
    parser.add_argument("--node-limit-scaling", type=int, default=20, help="e-nodes at most per graph node")
    parser.add_argument("--sizes", default="100,1000,10000", help="graph sizes for the scaling part")
    parser.add_argument("--skip-formulas", action="store_true")
    parser.add_argument("--verbose", action="store_true", help="one line per formula")
    args = parser.parse_args()
    args.sizes = [int(s) for s in args.sizes.split(",")]
    if not args.skip_formulas:
        fc = load_fpcore(args.fpcore or args.suite.parent / "fpcore.py")
        formulas(args, fc)
    scaling(args)


if __name__ == "__main__":
    main()
