"""Django ORM through the proxy (mysqlclient backend): `migrate` creates Django's own tables as single tables
on the default data source and the sharded model's table `t_order` by migration; CRUD, transactions that roll
back and commit across shards, and Django's introspection (SHOW FULL TABLES, information_schema,
SHOW INDEX) in logical names. Django's start-up runs the multi-statement
`SET SQL_AUTO_IS_NULL = 0; SET SESSION TRANSACTION ISOLATION LEVEL READ COMMITTED`."""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any

import pytest

from tests.compat.conftest import SPREAD, CompatEnv
from tests.compat.scenario import assert_logical

CLIENT_NAME = "django"


@pytest.fixture(scope="module")
def django_db(compat: CompatEnv) -> Iterator[Any]:
    os.environ["DJANGO_SETTINGS_MODULE"] = "tests.compat.django_app.settings"
    os.environ["SHARDPROXY_COMPAT_HOST"] = compat.host
    os.environ["SHARDPROXY_COMPAT_PORT"] = str(compat.port)
    os.environ["SHARDPROXY_COMPAT_DB"] = compat.database(CLIENT_NAME)
    import django
    from django.core.management import call_command
    from django.db import connection, connections

    django.setup()
    call_command("migrate", verbosity=0, interactive=False)
    yield connection
    connections.close_all()


def test_django_migrate_creates_single_and_sharded_tables(compat: CompatEnv, django_db: Any) -> None:
    ds0, ds1 = (set(s.execute("SHOW TABLES", compat.physical(CLIENT_NAME, i))) for i, s in enumerate(compat.servers))
    # Django's own tables are single tables on the first data source; t_order is sharded 2 x 2
    assert {("django_migrations",), ("django_content_type",), ("t_order_0",), ("t_order_1",)} <= ds0
    assert ds1 == {("t_order_0",), ("t_order_1",)}
    from django.db.migrations.recorder import MigrationRecorder

    applied = MigrationRecorder(django_db).applied_migrations()
    assert ("shop", "0001_initial") in applied and ("contenttypes", "0001_initial") in applied
    from django.core.management import call_command

    call_command("migrate", verbosity=0, interactive=False)  # idempotent: nothing left to apply


def test_django_crud_and_transactions(compat: CompatEnv, django_db: Any) -> None:
    from django.db import transaction

    from tests.compat.django_app.shop.models import Order

    Order.objects.all().delete()
    Order.objects.bulk_create([Order(order_id=o, user_id=u, status="new") for u, o in SPREAD])
    compat.assert_spread(CLIENT_NAME)
    assert list(Order.objects.order_by("order_id").values_list("order_id", "user_id")) == sorted(
        (o, u) for u, o in SPREAD)
    order = Order.objects.get(order_id=102, user_id=11)
    order.status = "paid"
    # a plain save() writes every column, user_id included, with WHERE order_id only: the proxy refuses to
    # change a sharding column it cannot prove unchanged; update_fields writes what changed
    order.save(update_fields=["status"])
    assert Order.objects.filter(user_id=10).update(status="sent") == 2
    assert Order.objects.filter(status="new").count() == 1
    Order.objects.create(order_id=104, user_id=10, status="new")
    assert Order.objects.get(pk=104).user_id == 10
    Order.objects.filter(pk=104).delete()
    assert compat.all_backend_rows(CLIENT_NAME) == [(100, 10, "sent"), (101, 10, "sent"), (102, 11, "paid"),
                                                    (103, 11, "new")]
    Order.objects.all().delete()
    assert compat.all_backend_rows(CLIENT_NAME) == []

    class Abort(Exception):
        pass

    with pytest.raises(Abort), transaction.atomic():  # a cross-shard transaction that rolls back
        for u, o in SPREAD:
            Order.objects.create(order_id=o, user_id=u, status="tx")
        assert Order.objects.count() == 4
        raise Abort
    assert compat.all_backend_rows(CLIENT_NAME) == []
    with transaction.atomic():  # ... and one that commits, with a savepoint rolled back inside
        for u, o in SPREAD:
            Order.objects.create(order_id=o, user_id=u, status="new")
        with pytest.raises(Abort), transaction.atomic():
            Order.objects.filter(user_id=11).update(status="gone")
            raise Abort
    compat.assert_spread(CLIENT_NAME)
    assert {r[2] for r in compat.all_backend_rows(CLIENT_NAME)} == {"new"}


def test_django_introspection(compat: CompatEnv, django_db: Any) -> None:
    intro = django_db.introspection
    with django_db.cursor() as cursor:
        tables = intro.get_table_list(cursor)
        assert sorted(t.name for t in tables) == ["django_content_type", "django_migrations", "t_order"]
        description = intro.get_table_description(cursor, "t_order")
        assert [c.name for c in description] == ["order_id", "user_id", "status"]
        constraints = intro.get_constraints(cursor, "t_order")
        assert_logical([tables, description, constraints])
        assert constraints["PRIMARY"]["columns"] == ["order_id"] and constraints["PRIMARY"]["primary_key"]
        assert [c["columns"] for c in constraints.values() if c["index"] and not c["primary_key"]] == [["user_id"]]
        assert intro.get_primary_key_column(cursor, "t_order") == "order_id"
        assert intro.get_sequences(cursor, "t_order") == []
        cursor.execute("SELECT @@tx_isolation, @@sql_auto_is_null")
        assert cursor.fetchone() == ("READ-COMMITTED", 0)
