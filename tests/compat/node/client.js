// node mysql2 client of the shardproxy compatibility suite, run by tests/compat/test_node_mysql2.py.
// Usage: node client.js <phase>   (connection from SHARDPROXY_COMPAT_HOST / _PORT / _DB)
// Phases: setup | crud | rollback | commit | metadata. Prints one JSON object; exits 1 on an error.
'use strict';

const mysql = require('mysql2/promise');

const SPREAD = [[10, 100], [10, 101], [11, 102], [11, 103]]; // (user_id, order_id) over all 4 actual tables
const INSERT = 'INSERT INTO t_order (order_id, user_id, status) VALUES (?, ?, ?)';

async function connect() {
  return mysql.createConnection({
    host: process.env.SHARDPROXY_COMPAT_HOST || '127.0.0.1',
    port: Number(process.env.SHARDPROXY_COMPAT_PORT || 3307),
    user: 'root',
    password: 'root',
    database: process.env.SHARDPROXY_COMPAT_DB || 'sharding_db',
    multipleStatements: true,
    supportBigNumbers: true,
    bigNumberStrings: false,
  });
}

const phases = {
  async setup(c) {
    const [[version]] = await c.query('SELECT VERSION() AS v, @@version_comment AS comment, DATABASE() AS db');
    await c.query('DROP TABLE IF EXISTS t_order; DROP TABLE IF EXISTS t_address');
    await c.query('CREATE TABLE t_order (order_id BIGINT NOT NULL, user_id INT NOT NULL, status VARCHAR(45) NULL, '
      + 'PRIMARY KEY (order_id), KEY idx_user (user_id))');
    await c.query('CREATE TABLE t_address (address_id BIGINT NOT NULL, address_name VARCHAR(100) NOT NULL, '
      + 'PRIMARY KEY (address_id))');
    await c.execute('INSERT INTO t_address (address_id, address_name) VALUES (?, ?)', [1, 'home']);
    return { version };
  },

  async crud(c) {
    const out = {};
    for (const [userId, orderId] of SPREAD.slice(0, 2)) {
      const [res] = await c.query(INSERT, [orderId, userId, 'new']); // client-side interpolation
      out[`query_insert_${orderId}`] = res.affectedRows;
    }
    for (const [userId, orderId] of SPREAD.slice(2)) {
      const [res] = await c.execute(INSERT, [orderId, userId, 'new']); // COM_STMT_PREPARE + EXECUTE
      out[`execute_insert_${orderId}`] = res.affectedRows;
    }
    [out.all] = await c.query('SELECT order_id, user_id, status FROM t_order ORDER BY order_id');
    [out.point] = await c.execute('SELECT status FROM t_order WHERE order_id = ? AND user_id = ?', [102, 11]);
    out.update = (await c.execute('UPDATE t_order SET status = ? WHERE user_id = ?', ['paid', 10]))[0].affectedRows;
    out.update2 = (await c.query("UPDATE t_order SET status = 'sent' WHERE order_id IN (101, 103)"))[0].affectedRows;
    [out.grouped] = await c.execute('SELECT status, COUNT(*) AS n FROM t_order GROUP BY status ORDER BY status');
    out.delete = (await c.execute('DELETE FROM t_order WHERE order_id = ? AND user_id = ?', [100, 10]))[0].affectedRows;
    out.delete_all = (await c.query('DELETE FROM t_order'))[0].affectedRows;
    return out;
  },

  async rollback(c) {
    await c.beginTransaction();
    for (const [userId, orderId] of SPREAD) await c.execute(INSERT, [orderId, userId, 'tx']);
    const [[inside]] = await c.query('SELECT COUNT(*) AS n FROM t_order');
    await c.rollback();
    const [[after]] = await c.query('SELECT COUNT(*) AS n FROM t_order');
    return { inside: Number(inside.n), after: Number(after.n) };
  },

  async commit(c) {
    await c.beginTransaction();
    for (const [userId, orderId] of SPREAD) await c.query(INSERT, [orderId, userId, 'new']);
    await c.commit();
    const [[after]] = await c.execute('SELECT COUNT(*) AS n FROM t_order');
    return { after: Number(after.n) };
  },

  async metadata(c) {
    const out = {};
    [out.tables] = await c.query('SHOW TABLES');
    [out.full_tables] = await c.query('SHOW FULL TABLES');
    [out.columns] = await c.query('SHOW COLUMNS FROM t_order');
    [out.index] = await c.query('SHOW INDEX FROM t_order');
    [out.create] = await c.query('SHOW CREATE TABLE t_order');
    [out.schema_tables] = await c.execute(
      'SELECT TABLE_NAME AS name FROM information_schema.TABLES WHERE TABLE_SCHEMA = ? ORDER BY TABLE_NAME',
      [process.env.SHARDPROXY_COMPAT_DB]);
    [out.schema_columns] = await c.query(
      'SELECT COLUMN_NAME AS name FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = DATABASE() '
      + "AND TABLE_NAME = 't_order' ORDER BY ORDINAL_POSITION");
    return out;
  },
};

async function main() {
  const phase = process.argv[2];
  if (!phases[phase]) throw new Error(`unknown phase ${phase}`);
  const c = await connect();
  try {
    const result = await phases[phase](c);
    process.stdout.write(JSON.stringify(result, (k, v) => (typeof v === 'bigint' ? Number(v) : v)) + '\n');
  } finally {
    await c.end();
  }
}

main().catch((err) => {
  process.stderr.write(`${err.code || ''} ${err.errno || ''} ${err.sqlMessage || err.message}\n`);
  process.exit(1);
});
