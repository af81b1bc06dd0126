"""Numbers of the MySQL client/server protocol, as enums so that packets and logs read as words."""

from __future__ import annotations

import enum

MAX_PAYLOAD = 0xFFFFFF  # a payload this long continues in the next frame


class Capability(enum.IntFlag):
    LONG_PASSWORD = 1
    FOUND_ROWS = 1 << 1
    LONG_FLAG = 1 << 2
    CONNECT_WITH_DB = 1 << 3
    NO_SCHEMA = 1 << 4
    COMPRESS = 1 << 5
    ODBC = 1 << 6
    LOCAL_FILES = 1 << 7
    IGNORE_SPACE = 1 << 8
    PROTOCOL_41 = 1 << 9
    INTERACTIVE = 1 << 10
    SSL = 1 << 11
    IGNORE_SIGPIPE = 1 << 12
    TRANSACTIONS = 1 << 13
    RESERVED = 1 << 14
    SECURE_CONNECTION = 1 << 15
    MULTI_STATEMENTS = 1 << 16
    MULTI_RESULTS = 1 << 17
    PS_MULTI_RESULTS = 1 << 18
    PLUGIN_AUTH = 1 << 19
    CONNECT_ATTRS = 1 << 20
    PLUGIN_AUTH_LENENC_CLIENT_DATA = 1 << 21
    CAN_HANDLE_EXPIRED_PASSWORDS = 1 << 22
    SESSION_TRACK = 1 << 23
    DEPRECATE_EOF = 1 << 24
    OPTIONAL_RESULTSET_METADATA = 1 << 25
    QUERY_ATTRIBUTES = 1 << 27
    MULTI_FACTOR_AUTHENTICATION = 1 << 28
    CAPABILITY_EXTENSION = 1 << 29
    SSL_VERIFY_SERVER_CERT = 1 << 30
    REMEMBER_OPTIONS = 1 << 31


# What the proxy offers clients. Everything here is implemented; the rest changes packet layouts.
SERVER_CAPABILITIES = (
    Capability.LONG_PASSWORD
    | Capability.FOUND_ROWS
    | Capability.LONG_FLAG
    | Capability.CONNECT_WITH_DB
    | Capability.NO_SCHEMA
    | Capability.ODBC
    | Capability.IGNORE_SPACE
    | Capability.PROTOCOL_41
    | Capability.INTERACTIVE
    | Capability.IGNORE_SIGPIPE
    | Capability.TRANSACTIONS
    | Capability.SECURE_CONNECTION
    | Capability.MULTI_STATEMENTS
    | Capability.MULTI_RESULTS
    | Capability.PS_MULTI_RESULTS
    | Capability.PLUGIN_AUTH
    | Capability.CONNECT_ATTRS
    | Capability.PLUGIN_AUTH_LENENC_CLIENT_DATA
    | Capability.CAN_HANDLE_EXPIRED_PASSWORDS
    | Capability.DEPRECATE_EOF
    | Capability.LOCAL_FILES  # LOAD DATA LOCAL INFILE: relayed between client and data source (as MariaDB offers it)
)


class ServerStatus(enum.IntFlag):
    IN_TRANS = 1
    AUTOCOMMIT = 1 << 1
    MORE_RESULTS_EXISTS = 1 << 3
    NO_GOOD_INDEX_USED = 1 << 4
    NO_INDEX_USED = 1 << 5
    CURSOR_EXISTS = 1 << 6
    LAST_ROW_SENT = 1 << 7
    DB_DROPPED = 1 << 8
    NO_BACKSLASH_ESCAPES = 1 << 9
    METADATA_CHANGED = 1 << 10
    QUERY_WAS_SLOW = 1 << 11
    PS_OUT_PARAMS = 1 << 12
    IN_TRANS_READONLY = 1 << 13
    SESSION_STATE_CHANGED = 1 << 14
    ANSI_QUOTES = 1 << 15  # MariaDB's: the session's sql_mode has ANSI_QUOTES


class Command(enum.IntEnum):
    SLEEP = 0x00
    QUIT = 0x01
    INIT_DB = 0x02
    QUERY = 0x03
    FIELD_LIST = 0x04
    CREATE_DB = 0x05
    DROP_DB = 0x06
    REFRESH = 0x07
    SHUTDOWN = 0x08
    STATISTICS = 0x09
    PROCESS_INFO = 0x0A
    CONNECT = 0x0B
    PROCESS_KILL = 0x0C
    DEBUG = 0x0D
    PING = 0x0E
    TIME = 0x0F
    DELAYED_INSERT = 0x10
    CHANGE_USER = 0x11
    BINLOG_DUMP = 0x12
    TABLE_DUMP = 0x13
    CONNECT_OUT = 0x14
    REGISTER_SLAVE = 0x15
    STMT_PREPARE = 0x16
    STMT_EXECUTE = 0x17
    STMT_SEND_LONG_DATA = 0x18
    STMT_CLOSE = 0x19
    STMT_RESET = 0x1A
    SET_OPTION = 0x1B
    STMT_FETCH = 0x1C
    DAEMON = 0x1D
    BINLOG_DUMP_GTID = 0x1E
    RESET_CONNECTION = 0x1F


class SetOption(enum.IntEnum):
    MULTI_STATEMENTS_ON = 0
    MULTI_STATEMENTS_OFF = 1


class ColumnType(enum.IntEnum):
    DECIMAL = 0
    TINY = 1
    SHORT = 2
    LONG = 3
    FLOAT = 4
    DOUBLE = 5
    NULL = 6
    TIMESTAMP = 7
    LONGLONG = 8
    INT24 = 9
    DATE = 10
    TIME = 11
    DATETIME = 12
    YEAR = 13
    NEWDATE = 14
    VARCHAR = 15
    BIT = 16
    TIMESTAMP2 = 17
    DATETIME2 = 18
    TIME2 = 19
    JSON = 245
    NEWDECIMAL = 246
    ENUM = 247
    SET = 248
    TINY_BLOB = 249
    MEDIUM_BLOB = 250
    LONG_BLOB = 251
    BLOB = 252
    VAR_STRING = 253
    STRING = 254
    GEOMETRY = 255


class ColumnFlag(enum.IntFlag):
    NOT_NULL = 1
    PRI_KEY = 1 << 1
    UNIQUE_KEY = 1 << 2
    MULTIPLE_KEY = 1 << 3
    BLOB = 1 << 4
    UNSIGNED = 1 << 5
    ZEROFILL = 1 << 6
    BINARY = 1 << 7
    ENUM = 1 << 8
    AUTO_INCREMENT = 1 << 9
    TIMESTAMP = 1 << 10
    SET = 1 << 11
    NO_DEFAULT_VALUE = 1 << 12
    ON_UPDATE_NOW = 1 << 13
    NUM = 1 << 15


class Collation(enum.IntEnum):
    """The collation ids the proxy itself uses in packets it builds."""

    LATIN1_SWEDISH_CI = 8
    UTF8_GENERAL_CI = 33
    UTF8MB4_GENERAL_CI = 45
    UTF8MB4_BIN = 46
    BINARY = 63


class ErrorCode(enum.IntEnum):
    """MySQL server error numbers the proxy emits itself."""

    CON_COUNT_ERROR = 1040
    HANDSHAKE_ERROR = 1043
    DBACCESS_DENIED_ERROR = 1044
    ACCESS_DENIED_ERROR = 1045
    NO_DB_ERROR = 1046
    UNKNOWN_COM_ERROR = 1047
    BAD_DB_ERROR = 1049
    NET_PACKET_TOO_LARGE = 1153
    NET_READ_ERROR = 1158
    NET_PACKETS_OUT_OF_ORDER = 1156
    UNKNOWN_ERROR = 1105
    NO_SUCH_THREAD = 1094
    KILL_DENIED_ERROR = 1095
    PARSE_ERROR = 1064
    NOT_SUPPORTED_YET = 1235
    NOT_SUPPORTED_AUTH_MODE = 1251
    QUERY_INTERRUPTED = 1317
    STATEMENT_TIMEOUT = 1969  # MariaDB's ER_STATEMENT_TIMEOUT (max_statement_time), SQLSTATE 70100
    MALFORMED_PACKET = 1835
    UNKNOWN_STMT_HANDLER = 1243
    WRONG_ARGUMENTS = 1210
    LOCK_WAIT_TIMEOUT = 1205
    SERVER_SHUTDOWN = 1053
    QUERY_TIMEOUT = 3024
