"""``Order`` is the logic table ``t_order`` of the example rules: sharded by user_id (data source) and
order_id (table). Django creates it through the proxy by migration, like any other table."""

from __future__ import annotations

from django.db import models


class Order(models.Model):
    order_id = models.BigIntegerField(primary_key=True)
    user_id = models.IntegerField(db_index=True)
    status = models.CharField(max_length=45, null=True)

    class Meta:
        app_label = "shop"
        db_table = "t_order"
        managed = True

    def __str__(self) -> str:
        return f"Order({self.order_id}, user {self.user_id}, {self.status})"
