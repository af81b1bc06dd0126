"""ShardingSphere's `!SHADOW` rule: a statement whose values (or hint) say it is test traffic runs on the shadow
data sources instead of the production ones (routing.shadow.config, routing.shadow.decide)."""

from routing.shadow.config import ShadowRule, load_shadow_rule
from routing.shadow.decide import shadowed

__all__ = ["ShadowRule", "load_shadow_rule", "shadowed"]
