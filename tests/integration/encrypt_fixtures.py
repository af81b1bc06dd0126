"""What the encryption tests share: `t_user` sharded by user_id over ds_0 / ds_1 (each module adds its own !ENCRYPT
rule over it)."""

SHARDING = """- !SHARDING
  tables:
    t_user:
      actualDataNodes: ds_${0..1}.t_user
      databaseStrategy:
        standard: {shardingColumn: user_id, shardingAlgorithmName: by_user}
  shardingAlgorithms:
    by_user: {type: INLINE, props: {algorithm-expression: 'ds_${user_id % 2}'}}
"""
