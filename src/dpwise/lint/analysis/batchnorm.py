"""Whether a file builds BatchNorm layers, directly or through a torchvision model that has them:
what batchnorm-without-sync and collective-under-rank-guard both ask."""

from __future__ import annotations

import ast
import re

from dpwise.lint.analysis import names as N
from dpwise.lint.analysis.context import FileContext

_TORCHVISION_BN = re.compile(
    r"^torchvision\.models\.(resnet\d+|resnext\w+|wide_resnet\w+|densenet\d+|mobilenet\w*|"
    r"efficientnet\w*|regnet\w+|shufflenet\w+|mnasnet\w+|googlenet|inception_v3|vgg\d+_bn)$"
)


def uses_batchnorm(ctx: FileContext) -> bool:
    """Does the file build a BatchNorm layer (directly or through a torchvision model)?
    Asked once per call by other rules, so the answer is kept on the file's context."""
    if "uses_batchnorm" not in ctx.memo:
        ctx.memo["uses_batchnorm"] = _uses_batchnorm(ctx)
    return ctx.memo["uses_batchnorm"]


def _uses_batchnorm(ctx: FileContext) -> bool:
    if "BatchNorm" in ctx.source:
        for node in ast.walk(ctx.tree):
            if isinstance(node, ast.Attribute | ast.Name) and ctx.qual(node) in N.BATCHNORM:
                return True
    return any(_TORCHVISION_BN.match(q) for q in ctx.calls_by_qual)
