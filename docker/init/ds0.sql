-- Runs once, when the ds0 container initialises its empty data directory.
-- The proxy creates the actual tables (t_order_0, t_order_1, ...) itself when a client sends
-- CREATE TABLE for the logical table through it.
CREATE DATABASE IF NOT EXISTS demo_ds_0 DEFAULT CHARACTER SET utf8mb4;

-- readwrite_db (docker/conf/database-readwrite.yaml): written here, read from ds0_replica, which
-- replicates this server by GTID (docker/init/ds0_replica.sql), so the table and rows arrive there too.
CREATE DATABASE IF NOT EXISTS demo_rw DEFAULT CHARACTER SET utf8mb4;
CREATE TABLE IF NOT EXISTS demo_rw.t_user (user_id INT PRIMARY KEY, user_name VARCHAR(50) NOT NULL);
INSERT IGNORE INTO demo_rw.t_user VALUES (1, 'alice'), (2, 'bob');
