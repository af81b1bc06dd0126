"""ShardingSphere's `!MASK` rule: result columns shown masked (routing.mask.algorithms, routing.mask.config).

The rule changes no route: the nodes compute ORDER BY, GROUP BY and WHERE on the real values, and only what
leaves the proxy for the client is masked (proxy.execution.masking), as ShardingSphere's merged-result
decorator does."""

from routing.mask.algorithms import MaskAlgorithm, make_algorithm
from routing.mask.config import MaskRule, load_mask_rule

__all__ = ["MaskAlgorithm", "MaskRule", "load_mask_rule", "make_algorithm"]
