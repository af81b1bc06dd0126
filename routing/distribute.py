"""What the kernel may distribute: the allow-list a statement over several data nodes must pass.

A statement that routes to one data node runs there unchanged (only table names are spliced), whatever
it contains. A statement that touches several nodes is split into per-node statements whose results the
merge engine combines; that is right only for constructs whose value over all rows is the combination of
their values over each node's rows. The kernel accepts such a statement only when it knows how to
distribute **every** construct in it:

* every node of its sqlglot tree is of a class in `ALLOWED` (row-local operators and functions, the
  aggregates the merge implements, the clauses the rewrite handles); every other class sqlglot models is
  listed in `REFUSED`, so that a new sqlglot release cannot slip a class through unclassified (the
  enumeration test in ``tests/routing/test_distribute.py`` fails on a class in neither set);
* a function sqlglot does not model (`exp.Anonymous`) is accepted only when its name is in
  `ROW_LOCAL_FUNCTIONS`, MySQL/MariaDB built-ins known to compute each row on its own;
* context rules (`construct_refusal`): clauses and options the rewrite does not handle (``SELECT ... INTO``,
  named windows, ``WITH ROLLUP``, ``PARTITION (...)``, ``RAND(seed)``), aggregates where the merge cannot
  combine them;
* `outer_join_refusal`: a broadcast or single table (or a derived table without sharded tables) on the
  preserved side of an outer join with a sharded table would repeat its unmatched rows once per node;
  it is accepted only in the grouped forms where those extra rows cannot change the answer.

Subqueries on sharded tables are decided by the kernel (`routing.kernel`), which knows where their rows
live: they are accepted over several nodes only when correlated to the outer sharded table on every
sharding column of a binding (or the same) table, so each node holds every row a subquery can see.
Everything else is refused with ER_NOT_SUPPORTED_YET (1235) naming the construct.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass

from sqlglot import exp

# sqlglot expression classes (by name) the kernel knows how to distribute over several data nodes.
# Row-local operators and functions, the aggregates the merge engine implements (see MERGED_AGGREGATES:
# their positions are checked by the select rewrite), and the clauses of SELECT / UPDATE / DELETE the
# rewrite handles. Subqueries (Subquery, Exists, In, Any, All) are allowed here and decided by the kernel.
ALLOWED: frozenset[str] = frozenset(
    """
    Add Alias All And Anonymous Any Between BitwiseAnd BitwiseLeftShift BitwiseNot BitwiseOr BitwiseRightShift
    BitwiseXor Boolean Column DPipe Distinct Div EQ Escape GT GTE Hint ILike Identifier In IntDiv Is LT LTE Like
    Literal Mod Mul NEQ Neg Not Null NullSafeEQ NullSafeNEQ Or Ordered Parameter Paren Placeholder Pow RegexpLike
    SessionParameter Star Sub Var Xor DataType DataTypeParam Interval Delete Update Case Cast Coalesce Collate
    Collation Convert Exists Greatest If Least Nullif Nvl2 Rand Uuid CurrentVersion Avg Count GroupConcat Max Min
    Sum BitwiseAndAgg BitwiseOrAgg BitwiseXorAgg Abs Acos Asin Atan Atan2 Ceil Cos Cot Degrees Exp Floor Ln Log Pi
    Radians Round Sign Sin Sqrt Tan Trunc BitwiseCount CTE From Group Having Join Limit Lock Offset Order Select
    Subquery Table TableAlias Tuple Where With Fetch LimitOptions Union Except Intersect IndexTableHint Introducer
    HexString BitString Rollup
    National JSONPath JSONPathKey JSONPathRoot JSONPathSubscript JSONPathWildcard JSONKeyValue Ascii BitLength Chr
    Compress Concat ConcatWs ConvertToCharset Decode Elt Encode Hex Left Length Lower MD5 NumberToStr Pad
    RegexpInstr RegexpReplace RegexpSubstr Repeat Replace Reverse Right SHA SHA2 Soundex Space StrPosition Substring
    SubstringIndex ToBase64 FromBase64 Trim Unhex Upper ConvertTimezone CurrentDate CurrentTime CurrentTimestamp
    Localtime Localtimestamp UtcDate UtcTime UtcTimestamp DateAdd DateSub DateDiff Day DayOfMonth DayOfWeek
    DayOfYear Dayname Extract Hour LastDay Minute Month Quarter Second StrToDate Time TimeFromParts TimeToStr
    Timestamp TimestampAdd TimestampDiff TsOrDsToDate TsOrDsToTimestamp UnixToTime Week WeekOfYear Year JSONExtract
    JSONExtractScalar JSONArrayAppend JSONArrayInsert JSONArrayContains JSONKeys JSONObject JSONRemove JSONSet
    JSONType JSONValue
    """.split()
)

# Every other expression class of sqlglot, refused over several data nodes: window and analytic functions,
# aggregates the merge does not implement, table functions, statements and DDL parts that never belong to
# a distributed query, and the constructs of other dialects.
REFUSED: frozenset[str] = frozenset(
    """
    AIAgg AIClassify AIEmbed AIForecast AIGenerate AISimilarity AISummarizeAgg Acosh AddConstraint AddMonths
    AddPartition Adjacent Agg AggregateKeyProperty AlgorithmProperty Aliases AllowedValuesProperty Alter AlterColumn
    AlterDistStyle AlterIndex AlterModifySqlSecurity AlterRename AlterSession AlterSet AlterSortKey Analyze
    AnalyzeColumns AnalyzeDelete AnalyzeHistogram AnalyzeListChainedRows AnalyzeSample AnalyzeStatistics
    AnalyzeValidate AnalyzeWith AnonymousAggFunc AnyValue ApiProperty ApplicationProperty Apply ApproxDistinct
    ApproxPercentileAccumulate ApproxPercentileCombine ApproxPercentileEstimate ApproxQuantile ApproxQuantiles
    ApproxTopK ApproxTopKAccumulate ApproxTopKCombine ApproxTopKEstimate ApproxTopSum ApproximateSimilarity ArgMax
    ArgMin Array ArrayAgg ArrayAll ArrayAny ArrayAppend ArrayCompact ArrayConcat ArrayConcatAgg
    ArrayConstructCompact ArrayContainedBy ArrayContains ArrayContainsAll ArrayDistinct ArrayExcept ArrayFilter
    ArrayFirst ArrayInsert ArrayIntersect ArrayLast ArrayMax ArrayMin ArrayOverlaps ArrayPosition ArrayPrepend
    ArrayRemove ArrayRemoveAt ArrayReverse ArraySize ArraySlice ArraySort ArraySum ArrayToString ArrayUnionAgg
    ArrayUniqueAgg ArraysZip Asinh AssumeColumnConstraint AtIndex AtTimeZone Atanh Attach AttachOption
    AutoIncrementColumnConstraint AutoIncrementProperty AutoRefreshProperty BackupProperty Base64DecodeBinary
    Base64DecodeString Base64Encode BinaryColumnConstraint BitmapBitPosition BitmapBucketNumber BitmapConstructAgg
    BitmapCount BitmapOrAgg Block BlockCompressionProperty Booland Boolnot Boolor BoolxorAgg Bracket BuildProperty
    ByteLength ByteString Cache CalledOnNullInputProperty CaseSpecificColumnConstraint CaseStatement CastToStrType
    CatalogProperty Cbrt Changes CharacterSet CharacterSetColumnConstraint CharacterSetProperty Check
    CheckColumnConstraint CheckJson CheckXml ChecksumProperty CityHash64 Clone Cluster ClusterProperty
    ClusteredByProperty ClusteredColumnConstraint CodePointsToBytes CodePointsToString CollateColumnConstraint
    CollateProperty ColumnConstraint ColumnDef ColumnPosition ColumnPrefix Columns CombinedAggFunc
    CombinedParameterizedAgg Command Comment CommentColumnConstraint Commit Comprehension CompressColumnConstraint
    ComputeProperty ComputedColumnConstraint ConditionalInsert Connect ConnectByRoot ConnectTo Constraint Contains
    Copy CopyGrantsProperty CopyParameter CopyTagsProperty Corr Cosh CosineDistance Coth CountIf CovarPop CovarSamp
    Create Credentials CredentialsProperty Csc Csch Cube CumeDist CurrentAccount CurrentAccountName
    CurrentAvailableRoles CurrentCatalog CurrentClient CurrentDatabase CurrentDatetime CurrentIpAddress
    CurrentOrganizationName CurrentOrganizationUser CurrentRegion CurrentRole CurrentRoleType CurrentSchema
    CurrentSchemas CurrentSecondaryRoles CurrentSession CurrentStatement CurrentTimestampLTZ CurrentTimezone
    CurrentTransaction CurrentUser CurrentUserId CurrentWarehouse DataBlocksizeProperty DataDeletionProperty
    DatabaseProperty Date DateBin DateFormatColumnConstraint DateFromParts DateFromUnixDate DateStrToDate
    DateToDateStr DateToDi DateTrunc Datetime DatetimeAdd DatetimeDiff DatetimeSub DatetimeTrunc DayOfWeekIso
    Declare DeclareItem DecodeCase DecompressBinary DecompressString Decrypt DecryptRaw DefaultColumnConstraint
    DefinerProperty DenseRank Describe Detach DiToDate DictProperty DictRange DictSubProperty Directory
    DirectoryStage Disconnect DistKeyProperty DistStyleProperty Distance DistanceNd Distribute DistributedByProperty
    Dot DotProduct Drop DropPartition DropPrimaryKey DuplicateKeyProperty DynamicIdentifier DynamicProperty
    EmptyProperty EncodeColumnConstraint EncodeProperty Encrypt EncryptRaw EndStatement EndsWith EngineProperty
    EnviromentProperty EphemeralColumnConstraint EqualNull EuclideanDistance ExcludeColumnConstraint Execute
    ExecuteAsProperty ExecuteSql Explode ExplodingGenerateSeries Export ExtendsLeft ExtendsRight ExternalProperty
    Factorial FallbackProperty FarmFingerprint FeaturesAtTime FileFormatProperty Filter Final First FirstValue
    Flatten Float64 ForClause ForIn ForceProperty ForeignKey Format FormatJson FormatPhrase FreespaceProperty
    FromBase FromBase32 FromISO8601Date FromISO8601Timestamp FromISO8601TimestampNanos FromJson FromTimeZone
    FunctionSpecification GapFill GenerateBool GenerateDateArray GenerateDouble GenerateEmbedding GenerateInt
    GenerateSeries GenerateTable GenerateText GenerateTimestampArray GeneratedAsIdentityColumnConstraint
    GeneratedAsRowColumnConstraint Generator Get GetExtract GetIgnoreCase Getbit Glob GlobalProperty Grant
    GrantPrincipal GrantPrivilege Grouping GroupingId GroupingSets HandlerProperty HashAgg HavingMax HeapProperty
    Heredoc HexDecodeString HistoricalData Hll Host HybridProperty IcebergProperty IfBlock IgnoreGrantsProperty
    IgnoreNulls InOutColumnConstraint IncludeProperty Index IndexColumnConstraint IndexConstraintOption
    IndexParameters InheritsProperty Initcap Inline InlineLengthColumnConstraint InputModelProperty
    InputOutputFormat Insert Install Int64 InteractiveProperty IntervalSpan Into InvisibleColumnConstraint IsArray
    IsAscii IsInf IsNan IsNullValue IsolatedLoadingProperty Iterate JSON JSONArray JSONArrayAgg JSONBContains
    JSONBContainsAllTopKeys JSONBContainsAnyTopKeys JSONBContainsTopKey JSONBDeleteAtPath JSONBExists JSONBExtract
    JSONBExtractScalar JSONBObjectAgg JSONBPathExists JSONBool JSONCast JSONColumnDef JSONExists JSONExtractArray
    JSONExtractQuote JSONFormat JSONKeysAtDepth JSONObjectAgg JSONPathFilter JSONPathPart JSONPathRecursive
    JSONPathScript JSONPathSelector JSONPathSlice JSONPathUnion JSONSchema JSONStripNulls JSONTable JSONValueArray
    JarowinklerSimilarity JoinHint JournalProperty JustifyDays JustifyHours JustifyInterval Kill Kurtosis Kwarg Lag
    Lambda LanguageProperty Last LastValue Lateral LaxBool LaxFloat64 LaxInt64 LaxString Lead Leave Levenshtein
    LikeProperty List ListStage LoadData LocationProperty LockProperty LockingProperty LockingStatement
    LogProperty LogicalAnd LogicalOr LoopBlock LowerHex MD5Digest MD5NumberLower64 MD5NumberUpper64 MLForecast
    MLTranslate MacroOverload MacroOverloads MakeInterval ManhattanDistance Map MapCat MapContainsKey MapDelete
    MapFromEntries MapInsert MapKeys MapPick MapSize MaskingPolicyColumnConstraint MaskingProperty Match
    MatchAgainst MatchRecognize MatchRecognizeMeasure MaterializedProperty Median Merge MergeBlockRatioProperty
    MergeTreeTTL MergeTreeTTLAction Minhash MinhashCombine Mode ModelAttribute ModifyColumn ModuleProperty Monthname
    MonthsBetween MultitableInserts Nanvl Nearest Negative NestedJSONSelect NetFunc NetworkProperty NextDay
    NextValueFor NoPrimaryIndexProperty NonClusteredColumnConstraint Normal Normalize
    NotForReplicationColumnConstraint NotNullColumnConstraint NthValue Ntile ObjectAgg ObjectId ObjectIdentifier
    ObjectInsert ObjectTransform OnCluster OnCommitProperty OnCondition OnConflict OnProperty
    OnUpdateColumnConstraint Opclass OpenJSON OpenJSONColumnDef Operator OptionsProperty OutputModelProperty
    OverflowTruncateBehavior Overlaps Overlay ParameterStyleProperty ParameterizedAgg ParseBignumeric ParseDatetime
    ParseIp ParseJSON ParseNumeric ParseTime ParseUrl Partition PartitionBoundSpec PartitionByExcluding
    PartitionByListProperty PartitionByRangeProperty PartitionByRangePropertyDynamic PartitionByTruncate PartitionId
    PartitionList PartitionRange PartitionedByBucket PartitionedByProperty PartitionedOfProperty
    PathColumnConstraint Per PercentRank PercentileCont PercentileDisc PeriodForSystemTimeConstraint
    PhysicalProperty Pivot PivotAlias PivotAny Posexplode PosexplodeOuter PositionalColumn Pragma PreWhere Predict
    PreviousDay PrimaryKey PrimaryKeyColumnConstraint Prior ProjectionDef ProjectionPolicyColumnConstraint
    Properties Property PropertyEQ PseudoType Pseudocolumn Put Qualify Quantile QueryBand QueryOption QueryTransform
    Randn Randstr RangeBucket RangeN Rank RawString ReadCSV ReadParquet RecursiveWithSearch Reduce Reference Refresh
    RefreshTriggerProperty RegDomain RegexpCount RegexpExtract RegexpExtractAll RegexpFullMatch RegexpILike
    RegexpSplit RegrAvgx RegrAvgy RegrCount RegrIntercept RegrR2 RegrSlope RegrSxx RegrSxy RegrSyy RegrValx RegrValy
    RemoteWithConnectionModelProperty RenameColumn RenameIndex RepeatBlock ReplaceColumns ReplacePartition
    RespectNulls Return Returning ReturnsProperty Revoke Rint Rollback RollupIndex RollupProperty
    RowAccessProperty RowFormatDelimitedProperty RowFormatProperty RowFormatSerdeProperty RowNumber RtrimmedLength
    SHA1Digest SHA2Digest SafeAdd SafeConvertBytesToString SafeDivide SafeFunc SafeMultiply SafeNegate SafeSubtract
    SampleProperty Schema SchemaCommentProperty ScopeResolution Search SearchIp Sec Sech Secret SecureProperty
    SecurityIntegrationProperty SemanticView Semicolon Seq1 Seq2 Seq4 Seq8 SequenceProperties SerdeProperties
    SessionUser Set SetConfigProperty SetItem SetOperation SetProperty SettingsProperty SharingProperty Show Shuffle
    SimilarTo Sinh Skewness SkipJSONColumn Slice Sort SortKeyProperty SoundexP123 Split SplitPart SplitToTable
    SqlReadWriteProperty SqlSecurityProperty StDistance StPoint StabilityProperty Stack StandardHash StarMap
    StartsWith Stddev StddevPop StddevSamp StorageHandlerProperty StorageProperty StoredProcedure StrToMap StrToTime
    StrToUnix Stream StreamingTableProperty StrictProperty String StringToArray StripNullValue Strtok
    StrtokSplitToTable StrtokToArray Struct StructExtract Stuff Summarize SwapTable Systimestamp TableColumn
    TableFromRows TableSample TableSpaceProperty Tag Tags Tanh TemporaryProperty TimeAdd TimeDiff TimeSlice
    TimeStrToDate TimeStrToTime TimeStrToUnix TimeSub TimeToTimeStr TimeToUnix TimeTrunc TimeseriesKey
    TimestampFromParts TimestampLtzFromParts TimestampSub TimestampTrunc TimestampTzFromParts TitleColumnConstraint
    ToArray ToBase32 ToBinary ToBoolean ToChar ToCodePoints ToDays ToDecfloat ToDouble ToFile ToMap ToNumber
    ToTableProperty ToVariant Transaction Transform TransformModelProperty TransientProperty Translate
    TranslateCharacters TriggerEvent TriggerExecute TriggerProperties TriggerReferencing TruncateTable Try
    TryBase64DecodeBinary TryBase64DecodeString TryCast TryHexDecodeBinary TryHexDecodeString TryToDecfloat
    TsOrDiToDi TsOrDsAdd TsOrDsDiff TsOrDsToDateStr TsOrDsToDatetime TsOrDsToTime Typeof Unary Uncache Undrop
    Unicode UnicodeString Uniform UniqueColumnConstraint UniqueKeyProperty UnixDate UnixMicros UnixMillis
    UnixSeconds UnixToStr UnixToTimeStr UnloggedProperty Unnest UnpivotColumns UppercaseColumnConstraint Use
    UserDefinedFunction UsingData UsingProperty UsingTemplateProperty UuidProperty Values VarMap Variadic Variance
    VariancePop VectorSearch Version ViewAttributeProperty VirtualProperty VolatileProperty
    WatermarkColumnConstraint WeekStart WeightString When Whens WhileBlock WidthBucket Window WindowSpec
    WithDataProperty WithFill WithJournalTableProperty WithOperator WithProcedureOptions WithSchemaBindingProperty
    WithSystemVersioningProperty WithTableHint WithinGroup XMLElement XMLGet XMLKeyValueOption XMLNamespace XMLTable
    YearOfWeek YearOfWeekIso ZeroFillColumnConstraint Zipf _ExplodeOuter _TimeUnit
    """.split()
)

# The aggregates `merge` combines (must equal the keys of `routing.rewrite._AGGREGATES`).
MERGED_AGGREGATES: frozenset[str] = frozenset(
    "Count Sum Min Max Avg GroupConcat BitwiseAndAgg BitwiseOrAgg BitwiseXorAgg".split()
)

# Functions sqlglot parses as exp.Anonymous that compute each row on its own (MySQL / MariaDB built-ins).
ROW_LOCAL_FUNCTIONS: frozenset[str] = frozenset(
    """
    ADDDATE ADDTIME AES_DECRYPT AES_ENCRYPT BIN BINARY BIN_TO_UUID CHARSET COERCIBILITY COLUMN_ADD COLUMN_CHECK
    COLUMN_CREATE COLUMN_DELETE COLUMN_EXISTS COLUMN_GET COLUMN_JSON COLUMN_LIST CONV CRC32 DECODE_ORACLE
    DES_DECRYPT DES_ENCRYPT EXPORT_SET EXTRACTVALUE FIELD FIND_IN_SET FORMAT_BYTES FORMAT_PICO_TIME FROM_DAYS
    GET_FORMAT INET6_ATON INET6_NTOA INET_ATON INET_NTOA IS_IPV4 IS_IPV4_COMPAT IS_IPV4_MAPPED IS_IPV6
    JSON_ARRAY JSON_ARRAY_INTERSECT JSON_COMPACT JSON_CONTAINS JSON_CONTAINS_PATH JSON_DEPTH JSON_DETAILED
    JSON_EQUALS JSON_EXISTS JSON_INSERT JSON_KEY_VALUE JSON_LENGTH JSON_LOOSE JSON_MERGE JSON_MERGE_PATCH
    JSON_MERGE_PRESERVE JSON_NORMALIZE JSON_OBJECT_FILTER_KEYS JSON_OBJECT_TO_ARRAY JSON_OVERLAPS JSON_PRETTY
    JSON_QUERY JSON_QUOTE JSON_REPLACE JSON_SCHEMA_VALID JSON_SEARCH JSON_UNQUOTE JSON_VALID LENGTHB
    LPAD_ORACLE MAKEDATE MAKE_SET MBRCONTAINS MICROSECOND MID NATURAL_SORT_KEY NOW OCT OCTET_LENGTH ORD
    PERIOD_ADD PERIOD_DIFF POINT QUOTE RANDOM_BYTES ROW SEC_TO_TIME SFORMAT SLEEP STRCMP ST_ASTEXT ST_CONTAINS
    ST_GEOMFROMTEXT ST_X ST_Y SUBDATE SUBTIME SYSDATE TIMEDIFF TIME_FORMAT TIME_TO_SEC TO_SECONDS UNCOMPRESS
    UNCOMPRESSED_LENGTH UNIX_TIMESTAMP UUID_SHORT UUID_TO_BIN WEEKDAY WEIGHT_STRING YEARWEEK
    """.split()
)

# Functions the proxy knows and refuses over several data nodes, with the reason.
_NOT_ROW_LOCAL_FUNCTIONS: dict[str, str] = {
    "JSON_ARRAYAGG": "JSON_ARRAYAGG is an aggregate the merge does not implement: each data node would return "
    "its own array",
    "JSON_OBJECTAGG": "JSON_OBJECTAGG is an aggregate the merge does not implement: each data node would "
    "return its own object",
    **dict.fromkeys(
        ("GET_LOCK", "RELEASE_LOCK", "RELEASE_ALL_LOCKS", "IS_FREE_LOCK", "IS_USED_LOCK"),
        "user-level locks are taken on each data node's connection, not once for the statement",
    ),
    **dict.fromkeys(("NEXTVAL", "LASTVAL", "SETVAL"), "sequences live on each data node separately"),
    **dict.fromkeys(
        ("LAST_INSERT_ID", "ROW_COUNT", "FOUND_ROWS", "CONNECTION_ID", "USER", "SYSTEM_USER"),
        "its value belongs to each data node's connection, not to the client's session",
    ),
    "LOAD_FILE": "it reads a file of each data node's server",
    "MASTER_POS_WAIT": "it waits on each data node's replication",
    "MASTER_GTID_WAIT": "it waits on each data node's replication",
    "VALUES": "VALUES(column) only has a value in INSERT ... ON DUPLICATE KEY UPDATE",
}

# Reasons for refused classes that users meet (the rest get a generic reason).
_CLASS_REASONS: dict[str, str] = {
    "Window": "a window function sees only the rows of the data node it runs on (each node numbers, ranks "
    "and aggregates its own rows)",
    "WindowSpec": "a window is computed per data node",
    "PropertyEQ": "assigning a user variable inside a query (@v := ...) depends on the order in which every "
    "row is processed, which no data node sees",
    "MatchAgainst": "full-text relevance is computed from each data node's own index statistics",
    "Into": "SELECT ... INTO would assign on each data node's connection",
    "JSONObjectAgg": "JSON_OBJECTAGG is an aggregate the merge does not implement: each data node would return "
    "its own object",
    "JSONArrayAgg": "JSON_ARRAYAGG is an aggregate the merge does not implement: each data node would return "
    "its own array",
    "CurrentSchema": "it would answer each data node's physical database",
    "CurrentUser": "it would answer the proxy's backend user",
    "SessionUser": "it would answer the proxy's backend user",
    "Cube": "the merge does not compute CUBE super-aggregate rows",
    "GroupingSets": "the merge does not compute GROUPING SETS",
    "Partition": "PARTITION (...) names partitions of one actual table",
    "JSONTable": "JSON_TABLE in a query over several data nodes is not supported",
}

_SELECT_ARGS = frozenset(
    {"with_", "expressions", "hint", "distinct", "from_", "operation_modifiers", "joins", "where", "group",
     "having", "order", "limit", "offset", "locks"}
)
_SELECT_ARG_NAMES = {
    "into": "SELECT ... INTO",
    "windows": "a named WINDOW clause",
    "qualify": "QUALIFY",
    "laterals": "LATERAL",
    "pivots": "PIVOT",
    "sample": "TABLESAMPLE",
    "kind": "SELECT AS ...",
}
_QUERY_ARGS = _SELECT_ARGS | {"this", "alias", "expression", "distinct", "by_name", "side", "kind"}
_JOIN_ARGS = frozenset({"this", "on", "side", "kind", "using", "method"})
_JOIN_KINDS = frozenset({"", "INNER", "CROSS", "OUTER", "STRAIGHT_JOIN"})
_JOIN_SIDES = frozenset({"", "LEFT", "RIGHT"})
_TABLE_ARGS = frozenset({"this", "alias", "db", "joins", "hints"})
_SCOPES = (exp.Select, exp.Update, exp.Delete, exp.Insert)


@dataclass(frozen=True)
class Refusal:
    """A construct the kernel cannot distribute: what it is (as written, shortened) and why."""

    construct: str
    reason: str
    advice: str = ""


def shown(node: exp.Expression, limit: int = 80) -> str:
    """The construct as MySQL SQL, shortened for a message."""
    try:
        text = node.sql(dialect="mysql")
    except Exception:  # sqlglot cannot render some partial nodes
        text = type(node).__name__
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _children(node: exp.Expression) -> Iterator[exp.Expression]:
    for value in node.args.values():
        if isinstance(value, exp.Expression):
            yield value
        elif isinstance(value, list):
            for v in value:
                if isinstance(v, exp.Expression):
                    yield v


def _walk(root: exp.Expression) -> Iterator[exp.Expression]:
    """Every node of the tree except the contents of optimizer hints (per-node advice, never a value) and the
    branch of `IF(0, x, y)` that is never evaluated (`x`: the proxy types a session function's value so,
    `IF(0, USER(), 'u@h')`, which calls no USER() on any data node)."""
    stack = [root]
    while stack:
        node = stack.pop()
        yield node
        if isinstance(node, exp.Hint):
            continue
        if isinstance(node, exp.If) and _never_true(node.this):
            never = node.args.get("true")
            stack.extend(reversed([c for c in _children(node) if c is not never]))
            continue
        stack.extend(reversed(list(_children(node))))


def _never_true(condition: object) -> bool:
    """A condition written as the number 0 (or FALSE)."""
    if isinstance(condition, exp.Boolean):
        return condition.this is False
    return isinstance(condition, exp.Literal) and not condition.is_string and condition.this == "0"


def scope_of(node: exp.Expression) -> exp.Expression | None:
    parent = node.parent
    while parent is not None and not isinstance(parent, _SCOPES):
        parent = parent.parent
    return parent


def _set_args(node: exp.Expression) -> list[str]:
    out = []
    for key, value in node.args.items():
        if value is None or value is False or value == []:
            continue
        out.append(key)
    return out


def construct_refusal(root: exp.Expression) -> Refusal | None:
    """The first construct of the statement that the kernel does not know how to distribute, or None."""
    allowed_aggregates = _placed_aggregates(root)
    if isinstance(root, exp.Select):
        refusal = _having_refusal(root)
        if refusal is not None:
            return refusal
    for node in _walk(root):
        name = type(node).__name__
        if name not in ALLOWED:
            if name in REFUSED:
                reason = _CLASS_REASONS.get(name)
                if reason is None and isinstance(node, exp.AggFunc):
                    reason = f"{name} is an aggregate the merge does not implement ({_MERGED_TEXT})"
                return Refusal(shown(node), reason or f"the proxy does not know how to distribute {name}")
            return Refusal(shown(node), f"sqlglot class {name} is not classified by the proxy")
        refusal = _context_refusal(node, root, allowed_aggregates)
        if refusal is not None:
            return refusal
    return None


_MERGED_TEXT = "COUNT, SUM, MIN, MAX, AVG, GROUP_CONCAT, BIT_AND, BIT_OR, BIT_XOR"


# What `merge.having` evaluates after merging (besides output columns and the merged aggregates).
_HAVING_EVALUATED = frozenset(
    "Paren Literal Null Boolean Column Identifier And Or Xor Not EQ NEQ GT GTE LT LTE NullSafeEQ Add Sub Mul "
    "Div IntDiv Mod Neg Is In Between Like".split()
)


def _having_refusal(select: exp.Select) -> Refusal | None:
    """Over several nodes HAVING is evaluated by the merge on the merged groups: only what it computes."""
    having = select.args.get("having")
    if having is None:
        return None
    items = {_normalized(i.unalias()) for i in select.expressions}
    stack: list[exp.Expression] = [having.this]
    while stack:
        node = stack.pop()
        name = type(node).__name__
        if name in MERGED_AGGREGATES or _normalized(node) in items:
            continue  # a merged aggregate (derived by the rewrite when not selected) or an output column
        if name not in _HAVING_EVALUATED or (isinstance(node, exp.In) and node.args.get("query") is not None):
            return Refusal(
                shown(node),
                "over several data nodes HAVING is evaluated by the proxy on the merged groups, and it only "
                "computes comparisons, AND / OR / NOT, IS, IN, BETWEEN, LIKE and arithmetic over the select "
                "list's columns and aggregates",
                "select the expression and use its alias in HAVING",
            )
        stack.extend(node.iter_expressions())
    return None


def _normalized(node: exp.Expression) -> str:
    try:
        return node.sql(dialect="mysql").lower()
    except Exception:  # sqlglot cannot render some partial nodes
        return repr(node)


def _placed_aggregates(root: exp.Expression) -> set[int]:
    """Aggregates of the root SELECT where the select rewrite merges them: whole select items, HAVING,
    whole ORDER BY items."""
    if not isinstance(root, exp.Select):
        return set()
    out: set[int] = set()
    for item in root.expressions:
        out.add(id(item.unalias()))
        for agg in item.find_all(exp.AggFunc):
            out.add(id(agg))  # an aggregate inside an expression: refused by the rewrite, in its words
    having = root.args.get("having")
    if having is not None:
        out.update(id(a) for a in having.find_all(exp.AggFunc))
    order = root.args.get("order")
    if order is not None:
        out.update(id(o.this) for o in order.expressions if isinstance(o, exp.Ordered))
        # inside an ORDER BY expression: computed after the merge (routing.computed) or refused there
        out.update(id(a) for o in order.expressions for a in o.find_all(exp.AggFunc))
    return out


def _context_refusal(node: exp.Expression, root: exp.Expression, placed: set[int]) -> Refusal | None:
    if isinstance(node, exp.Anonymous):
        fname = str(node.this).upper()
        if fname in ROW_LOCAL_FUNCTIONS:
            return None
        reason = _NOT_ROW_LOCAL_FUNCTIONS.get(fname) or (
            f"function {fname}() is not one the proxy knows to compute each row on its own (a stored function "
            "or a built-in the proxy does not model)"
        )
        return Refusal(shown(node), reason)
    if isinstance(node, exp.Select):
        extra = [k for k in _set_args(node) if k not in _SELECT_ARGS]
        if extra:
            what = _SELECT_ARG_NAMES.get(extra[0], extra[0])
            reason = {"into": _CLASS_REASONS["Into"], "windows": _CLASS_REASONS["Window"]}.get(
                extra[0], f"{what} is not handled by the rewrite"
            )
            return Refusal(what, reason)
        return None
    if isinstance(node, exp.Subquery | exp.Union | exp.Except | exp.Intersect):
        extra = [k for k in _set_args(node) if k not in _QUERY_ARGS]
        if extra:
            what = _SELECT_ARG_NAMES.get(extra[0], extra[0])
            return Refusal(what, f"{what} is not handled by the rewrite")
        return None
    if isinstance(node, exp.Join):
        side = str(node.args.get("side") or "").upper()
        kind = str(node.args.get("kind") or "").upper()
        extra = [k for k in _set_args(node) if k not in _JOIN_ARGS]
        if extra or side not in _JOIN_SIDES or kind not in _JOIN_KINDS:
            return Refusal(shown(node), "this kind of join is not handled over several data nodes")
        return None
    if isinstance(node, exp.Table):
        extra = [k for k in _set_args(node) if k not in _TABLE_ARGS]
        if extra:
            return Refusal(shown(node), f"the table option {extra[0]} is not handled over several data nodes")
        return None
    if isinstance(node, exp.Group):
        extra = [k for k in _set_args(node) if k not in ("expressions", "rollup")]  # ROLLUP: merge.rollup
        if extra:
            reason = _CLASS_REASONS.get(extra[0].capitalize(), "the merge does not compute super-aggregate rows")
            return Refusal(f"GROUP BY ... {extra[0].upper()}", reason)
        return None
    if isinstance(node, exp.Rand):
        if any(node.args.get(k) is not None for k in ("this", "lower", "upper")):
            return Refusal(shown(node), "RAND(seed) restarts its sequence on every data node")
        return None
    if isinstance(node, exp.Distinct):
        if node.args.get("on") is not None:
            return Refusal(shown(node), "DISTINCT ON is not handled over several data nodes")
        return None
    if isinstance(node, exp.Column):
        if node.args.get("join_mark"):
            return Refusal(shown(node), "(+) outer join marks are not handled")
        return None
    if isinstance(node, exp.Limit):
        extra = [k for k in _set_args(node) if k not in ("expression", "offset")]
        if extra:
            return Refusal(shown(node), "this LIMIT form is not handled over several data nodes")
        return None
    if type(node).__name__ in MERGED_AGGREGATES:
        if isinstance(root, exp.Select) and scope_of(node) is root and id(node) not in placed:
            return Refusal(
                shown(node),
                "an aggregate inside an ORDER BY / GROUP BY expression is computed per data node, and the merge "
                "can only combine aggregates that are whole select items, whole ORDER BY items or parts of HAVING",
                "select the aggregate itself and order by its alias",
            )
        return None
    return None


# --- writes to broadcast tables: the same statement on every data source --------------------------------

# Functions whose value differs from one server to the other (NOW() and the like are statement-constant
# timestamps: accepted).
_UNREPEATABLE_FUNCTIONS = frozenset({"UUID_SHORT", "SYSDATE", "RANDOM_BYTES"})


def replica_refusal(root: exp.Expression) -> Refusal | None:
    """A write sent to every data source (a broadcast table) must do the same there: nothing random, no
    LIMIT that picks arbitrary rows."""
    for node in _walk(root):
        if isinstance(node, exp.Rand | exp.Uuid) or (
            isinstance(node, exp.Anonymous) and str(node.this).upper() in _UNREPEATABLE_FUNCTIONS
        ):
            return Refusal(shown(node), "its value differs on every data source")
    if isinstance(root, exp.Update | exp.Delete) and root.args.get("limit") is not None:
        if root.args.get("order") is None:
            return Refusal(
                "LIMIT without ORDER BY", "each data source may pick other rows",
                "order by a unique key, or name the rows in WHERE",
            )
    return None


# --- outer joins with a broadcast (or single) table on the preserved side ------------------------------

SHARDED = "sharded"
OTHER = "other"

_NULL_PROPAGATING = (
    exp.Column, exp.Literal, exp.Add, exp.Sub, exp.Mul, exp.Div, exp.IntDiv, exp.Mod, exp.Neg, exp.Paren,
    exp.Identifier, exp.Cast, exp.DataType, exp.DataTypeParam, exp.Distinct,
)
_DUPLICATE_INSENSITIVE = ("Min", "Max")


@dataclass(frozen=True)
class OuterJoinProblem:
    scope: exp.Select
    join: exp.Join
    preserved: str  # text of the preserved side's first table, for the message
    sharded: exp.Table  # the sharded table on the null-supplying side


class OuterJoins:
    """Finds outer joins whose preserved side holds no sharded table while the other side does: every data
    node returns the preserved side's unmatched rows (a broadcast table's rows once per node, and rows
    unmatched on one node though matched on another), so the merged result has rows a single database
    would not. Such a join is accepted (`refusal` returns None) only in the root SELECT, alone with one
    sharded table, in a grouped form where those rows change nothing:

    * GROUP BY over preserved-side columns, with aggregates over the sharded table's columns that are NULL
      on an unmatched row (COUNT(o.x), SUM(o.x) ... skip it), or MIN / MAX / DISTINCT aggregates of the
      preserved side (duplicates do not change them); or
    * SELECT DISTINCT over preserved-side columns only;

    and no WHERE on the sharded table's columns (it would see the invented rows).
    """

    def __init__(
        self,
        root: exp.Expression,
        category: Callable[[exp.Table], str | None],
        ref: Callable[[exp.Table], str],
        columns: Callable[[exp.Table], Sequence[str] | None],
    ) -> None:
        self.root = root
        self.category = category  # sharded | broadcast | single | None (CTE, dual, foreign)
        self.ref = ref
        self.columns = columns

    def problems(self) -> list[OuterJoinProblem]:
        out: list[OuterJoinProblem] = []
        for select in self.root.find_all(exp.Select):
            from_ = select.args.get("from_")
            if from_ is None:
                continue
            self._fold([from_.this, *(j.this for j in select.args.get("joins") or ())],
                       [None, *(select.args.get("joins") or ())], select, out)
        return out

    def _kind(self, source: exp.Expression, scope: exp.Select, out: list[OuterJoinProblem]) -> str:
        if isinstance(source, exp.Table):
            joins = source.args.get("joins") or ()
            own = SHARDED if self.category(source) == SHARDED else OTHER
            if not joins:
                return own
            return self._fold([source, *(j.this for j in joins)], [None, *joins], scope, out, first=own)
        if isinstance(source, exp.Subquery) and isinstance(source.this, exp.Table):
            return self._kind(source.this, scope, out)  # a parenthesized join group
        if any(self.category(t) == SHARDED for t in source.find_all(exp.Table)):
            return SHARDED
        return OTHER

    def _fold(
        self,
        sources: list[exp.Expression],
        joins: list[exp.Join | None],
        scope: exp.Select,
        out: list[OuterJoinProblem],
        first: str | None = None,
    ) -> str:
        state = first if first is not None else self._kind(sources[0], scope, out)
        for source, join in zip(sources[1:], joins[1:], strict=True):
            assert join is not None
            right = self._kind(source, scope, out)
            side = str(join.args.get("side") or "").upper()
            if side == "LEFT" and state == OTHER and right == SHARDED:
                out.append(OuterJoinProblem(scope, join, shown(sources[0], 40), _first_sharded(source, self)))
            elif side == "RIGHT" and state == SHARDED and right == OTHER:
                out.append(OuterJoinProblem(scope, join, shown(source, 40), _first_sharded(sources[0], self)))
            state = SHARDED if SHARDED in (state, right) else OTHER
        return state

    def refusal(self) -> Refusal | None:
        problems = self.problems()
        if not problems:
            return None
        problem = problems[0]
        sharded_name = self.ref(problem.sharded)
        refusal = Refusal(
            shown(problem.join, 60),
            f"{problem.preserved} is on the preserved side of an outer join with sharded table "
            f"{problem.sharded.name}: every data node returns its rows that have no match on that node, so "
            "they would repeat once per data node",
            "put the sharded table on the preserved side, use an inner join, or group by the preserved side's "
            f"columns and aggregate only {sharded_name}'s columns (COUNT({sharded_name}.col), SUM, MIN, MAX ...)",
        )
        if len(problems) > 1 or problem.scope is not self.root:
            return refusal
        return None if self._harmless(problem) else refusal

    # -- the grouped forms where the invented rows change nothing --

    def _harmless(self, problem: OuterJoinProblem) -> bool:
        select = problem.scope
        tables = [t for t in select.find_all(exp.Table) if self.category(t) == SHARDED]
        if len(tables) != 1 or tables[0] is not problem.sharded:
            return False
        if any(True for _ in select.find_all(exp.Subquery, exp.Exists)):
            return False
        self._sharded_ref = self.ref(problem.sharded)
        self._sharded_columns = self.columns(problem.sharded)
        self._aliases = {
            item.alias.lower(): item.this for item in select.expressions if isinstance(item, exp.Alias)
        }
        self._refs = {self.ref(t) for t in select.find_all(exp.Table)}
        where = select.args.get("where")
        if where is not None and self._touches(where.this, aliases=False) is not False:
            return False
        group = select.args.get("group")
        aggregates = [a for item in select.expressions for a in item.find_all(exp.AggFunc)]
        distinct = select.args.get("distinct") is not None
        if group is None and not aggregates:
            # SELECT DISTINCT over the preserved side only
            return distinct and all(self._touches(i, aliases=False) is False for i in select.expressions)
        if group is not None and any(self._touches(g, aliases=True) is not False for g in group.expressions):
            return False
        for item in select.expressions:
            if not self._item_ok(item.unalias()):
                return False
        having = select.args.get("having")
        if having is not None and not self._item_ok(having.this, aliases=True):
            return False
        order = select.args.get("order")
        if order is not None and not all(self._item_ok(o.this, aliases=True) for o in order.expressions):
            return False
        return True

    def _item_ok(self, node: exp.Expression, aliases: bool = False) -> bool:
        """Aggregates acceptable over the invented rows; everything else free of the sharded columns."""
        if type(node).__name__ in MERGED_AGGREGATES:
            return self._aggregate_ok(node)
        if isinstance(node, exp.AggFunc):
            return False
        for agg in list(node.find_all(exp.AggFunc)):
            if agg is not node and not self._aggregate_ok(agg):
                return False
        return self._touches(node, aliases=aliases, skip_aggregates=True) is False

    def _aggregate_ok(self, agg: exp.Expression) -> bool:
        if type(agg).__name__ not in MERGED_AGGREGATES:
            return False
        arg = agg.this
        if arg is None or isinstance(arg, exp.Star):
            return False  # COUNT(*) counts the invented rows
        inner = arg.expressions[0] if isinstance(arg, exp.Distinct) and len(arg.expressions) == 1 else arg
        touches = self._touches(inner, aliases=False)
        if touches is True and all(isinstance(n, _NULL_PROPAGATING) for n in inner.walk()):
            cols = list(inner.find_all(exp.Column))
            return all(self._column_side(c, aliases=False) is True for c in cols)  # NULL on an invented row
        if touches is False:
            return type(agg).__name__ in _DUPLICATE_INSENSITIVE or isinstance(arg, exp.Distinct)
        return False

    def _touches(self, node: exp.Expression, *, aliases: bool, skip_aggregates: bool = False) -> bool | None:
        """Does ``node`` read a column of the sharded table (None: cannot tell)?"""
        result: bool | None = False
        for column in node.find_all(exp.Column):
            if skip_aggregates and any(isinstance(p, exp.AggFunc) for p in _up_to(column, node)):
                continue
            side = self._column_side(column, aliases=aliases)
            if side is True:
                return True
            if side is None:
                result = None
        return result

    def _column_side(self, column: exp.Column, *, aliases: bool) -> bool | None:
        if isinstance(column.this, exp.Star):
            qualifier = column.table.lower()
            return None if not qualifier else qualifier == self._sharded_ref
        qualifier = column.table.lower() if column.table else ""
        name = column.name.lower()
        if qualifier:
            if qualifier == self._sharded_ref:
                return True
            return False if qualifier in self._refs else None
        as_column: bool | None = (
            None if self._sharded_columns is None else name in {c.lower() for c in self._sharded_columns}
        )
        if aliases and name in self._aliases:
            # MariaDB may take the name as the alias or as the column: both must be free of the sharded table
            aliased = self._aliases[name]
            as_alias = False if aliased.find(exp.AggFunc) is not None else self._touches(aliased, aliases=False)
            if as_alias is True or as_column is True:
                return True
            return None if None in (as_alias, as_column) else False
        return as_column


def _up_to(node: exp.Expression, top: exp.Expression) -> Iterator[exp.Expression]:
    parent = node.parent
    while parent is not None:
        yield parent
        if parent is top:
            return
        parent = parent.parent


def _first_sharded(source: exp.Expression, joins: OuterJoins) -> exp.Table:
    for table in source.find_all(exp.Table):
        if joins.category(table) == SHARDED:
            return table
    assert isinstance(source, exp.Table)
    return source

