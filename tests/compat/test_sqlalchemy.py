"""SQLAlchemy 2 ORM through the proxy: `create_all` of the sharded models, session CRUD, transactions that
roll back and commit across shards, and reflection in logical names; on three DBAPI drivers and on the
asyncio extension (asyncmy)."""

from __future__ import annotations

import pytest
import sqlalchemy as sa
from sqlalchemy.ext.asyncio import create_async_engine
from sqlalchemy.orm import DeclarativeBase, Mapped, Session, mapped_column

from tests.compat.conftest import SPREAD, CompatEnv
from tests.compat.scenario import assert_logical

CLIENT_NAME = "sqlalchemy"


class Base(DeclarativeBase):
    pass


class Order(Base):
    __tablename__ = "t_order"
    order_id: Mapped[int] = mapped_column(sa.BigInteger, primary_key=True, autoincrement=False)
    user_id: Mapped[int] = mapped_column(sa.Integer, index=True)
    status: Mapped[str | None] = mapped_column(sa.String(45))


class OrderItem(Base):
    __tablename__ = "t_order_item"
    order_item_id: Mapped[int] = mapped_column(sa.BigInteger, primary_key=True, autoincrement=False)
    order_id: Mapped[int] = mapped_column(sa.BigInteger)
    user_id: Mapped[int] = mapped_column(sa.Integer)
    status: Mapped[str | None] = mapped_column(sa.String(45))


def _orders(status: str) -> list[Order]:
    return [Order(order_id=o, user_id=u, status=status) for u, o in SPREAD]


@pytest.mark.parametrize("driver", ["pymysql", "mysqldb", "mysqlconnector"])
def test_sqlalchemy_orm(compat: CompatEnv, driver: str) -> None:
    d = compat.dsn(CLIENT_NAME)
    args = "?ssl_disabled=true&use_pure=true" if driver == "mysqlconnector" else ""
    engine = sa.create_engine(f"mysql+{driver}://root:root@{d['host']}:{d['port']}/{d['database']}{args}")
    try:
        Base.metadata.drop_all(engine)
        Base.metadata.create_all(engine)
        assert compat.all_backend_rows(CLIENT_NAME) == []

        with Session(engine) as session:  # CRUD
            session.add_all(_orders("new"))
            session.commit()
            compat.assert_spread(CLIENT_NAME)
            assert [(o.order_id, o.user_id) for o in session.scalars(sa.select(Order).order_by(Order.order_id))] \
                == sorted(((o, u) for u, o in SPREAD))
            order = session.get(Order, 102)
            assert order is not None and order.user_id == 11
            order.status = "paid"
            session.commit()
            assert session.scalar(sa.select(sa.func.count()).select_from(Order).where(Order.status == "new")) == 3
            session.execute(sa.update(Order).where(Order.user_id == 10).values(status="sent"))
            session.delete(order)
            session.commit()
            assert compat.all_backend_rows(CLIENT_NAME) == [(100, 10, "sent"), (101, 10, "sent"), (103, 11, "new")]
            session.execute(sa.delete(Order))
            session.commit()

        with Session(engine) as session:  # a cross-shard transaction that rolls back
            session.add_all(_orders("tx"))
            session.flush()
            assert session.scalar(sa.select(sa.func.count()).select_from(Order)) == 4
            session.rollback()
        assert compat.all_backend_rows(CLIENT_NAME) == []
        with Session(engine) as session, session.begin():  # ... and one that commits
            session.add_all(_orders("new"))
            session.add(OrderItem(order_item_id=1, order_id=100, user_id=10, status="new"))
        compat.assert_spread(CLIENT_NAME)

        inspector = sa.inspect(engine)  # reflection
        assert inspector.get_table_names() == ["t_order", "t_order_item"]
        assert [c["name"] for c in inspector.get_columns("t_order")] == ["order_id", "user_id", "status"]
        assert inspector.get_pk_constraint("t_order")["constrained_columns"] == ["order_id"]
        assert [i["column_names"] for i in inspector.get_indexes("t_order")] == [["user_id"]]
        assert inspector.has_table("t_order") and not inspector.has_table("t_missing")
        reflected = sa.MetaData()
        reflected.reflect(engine)
        assert sorted(reflected.tables) == ["t_order", "t_order_item"]
        assert_logical([repr(t) for t in reflected.tables.values()])
    finally:
        engine.dispose()


async def test_sqlalchemy_asyncio(compat: CompatEnv) -> None:
    d = compat.dsn(CLIENT_NAME)
    engine = create_async_engine(f"mysql+asyncmy://root:root@{d['host']}:{d['port']}/{d['database']}")
    try:
        async with engine.begin() as conn:
            await conn.run_sync(Base.metadata.drop_all)
            await conn.run_sync(Base.metadata.create_all)
        async with engine.connect() as conn:
            await conn.execute(sa.insert(Order), [{"order_id": o, "user_id": u, "status": "tx"} for u, o in SPREAD])
            await conn.rollback()
        assert compat.all_backend_rows(CLIENT_NAME) == []
        async with engine.begin() as conn:
            await conn.execute(sa.insert(Order), [{"order_id": o, "user_id": u, "status": "new"} for u, o in SPREAD])
        compat.assert_spread(CLIENT_NAME)
        async with engine.connect() as conn:
            names = await conn.run_sync(lambda sync: sa.inspect(sync).get_table_names())
            assert names == ["t_order", "t_order_item"]
    finally:
        await engine.dispose()
