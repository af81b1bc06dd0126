#!/usr/bin/env sysbench
-- A scatter ORDER BY ... LIMIT: every event is one text-protocol query
--   SELECT order_id, user_id, status, amount FROM <table> ORDER BY order_id LIMIT <limit>
-- Through the proxy's sharding_db, t_order is 2 data sources x 2 tables (bench/scatter_memory.py's
-- layout): the query goes to all 4 nodes and the proxy merges their ordered streams and cuts at LIMIT.
-- Against a backend directly (--table=t_order_0) it is the same query on one node, for scale.
-- Used by bench/suite.py; no prepare/cleanup commands (the suite loads the tables).

sysbench.cmdline.options = {
  table = {"table to read", "t_order"},
  limit = {"rows per query", 10},
}

function thread_init()
  drv = sysbench.sql.driver()
  con = drv:connect()
  stmt = string.format("SELECT order_id, user_id, status, amount FROM %s ORDER BY order_id LIMIT %d",
                       sysbench.opt.table, sysbench.opt.limit)
end

function event()
  con:query(stmt)
end

function thread_done()
  con:disconnect()
end
