-- Runs once, when the ds0_replica container initialises its empty data directory: replicate ds0 by GTID
-- (auto-position), from the start of its binary log, so demo_rw and its rows arrive here.
-- The replica connection is retried until ds0 answers, and restarts with the server.
CHANGE REPLICATION SOURCE TO
  SOURCE_HOST = 'ds0', SOURCE_PORT = 3306, SOURCE_USER = 'root', SOURCE_PASSWORD = 'root',
  SOURCE_AUTO_POSITION = 1, SOURCE_CONNECT_RETRY = 5, GET_SOURCE_PUBLIC_KEY = 1;
START REPLICA;
