-- Runs once, when the ds0 container initialises its empty data directory.
-- The proxy creates the actual tables (t_order_0, t_order_1, ...) itself when a client sends
-- CREATE TABLE for the logical table through it.
CREATE DATABASE IF NOT EXISTS demo_ds_0 DEFAULT CHARACTER SET utf8mb4;
