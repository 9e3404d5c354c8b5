"""The stable softmax family: SymbolicOps with max-shifted bodies and explicit pullbacks."""

from .exp_of_sum import ExpOfSum, exp_of_sum
from .logaddexp import Log1mExp, LogAddExp, LogDiffExp, log1mexp, logaddexp, logdiffexp
from .logcosh import LogCosh, log_cosh
from .logerfc import LogErfc, log_erfc
from .logndtr import LogNdtr, log_ndtr
from .logsumexp import LogCumSumExp, LogMeanExp, LogSumExp, logcumsumexp, logmeanexp, logsumexp
from .sech import Sech, sech
from .sigmoid_difference import LogSigmoidDifference, log_sigmoid_difference
from .softmax import LogSoftmax, Softmax, SoftmaxCrossEntropy, log_softmax, softmax, softmax_cross_entropy
from .softplus import (
    Logit,
    LogSigmoid,
    Sigmoid,
    Softplus,
    expit,
    log1pexp,
    log_expit,
    log_sigmoid,
    logit,
    sigmoid,
    softplus,
)
from .xlogy import XExpX, XLog1PY, XLogY, xexpx, xlog1py, xlogy

__all__ = [
    "ExpOfSum",
    "Log1mExp",
    "LogAddExp",
    "LogCumSumExp",
    "LogDiffExp",
    "LogMeanExp",
    "LogSigmoid",
    "LogSoftmax",
    "LogSumExp",
    "LogErfc",
    "LogCosh",
    "LogNdtr",
    "LogSigmoidDifference",
    "Logit",
    "Sech",
    "Sigmoid",
    "Softmax",
    "SoftmaxCrossEntropy",
    "Softplus",
    "XExpX",
    "XLog1PY",
    "XLogY",
    "exp_of_sum",
    "expit",
    "log1mexp",
    "log1pexp",
    "log_cosh",
    "log_erfc",
    "log_ndtr",
    "log_expit",
    "log_sigmoid",
    "log_sigmoid_difference",
    "log_softmax",
    "logaddexp",
    "logcumsumexp",
    "logdiffexp",
    "logit",
    "logmeanexp",
    "logsumexp",
    "sech",
    "sigmoid",
    "softmax",
    "softmax_cross_entropy",
    "softplus",
    "xexpx",
    "xlog1py",
    "xlogy",
]
