"""The managed move of a resharding (ShardingSphere's migration words: MIGRATE TABLE, SHOW MIGRATION LIST /
STATUS, CHECK MIGRATION, COMMIT MIGRATION, ROLLBACK MIGRATION) for a table inside its resharding window
(`routing.model.DualRouting`): copy the rows the new strategy places elsewhere, verify, cut over.

* `gate`: pauses writes to one table while a copy batch or COMMIT holds it;
* `store`: job state in the `shardproxy` schema of the database's first data source (resumable);
* `job`: the copy, the check, the commit and the rollback;
* `rules`: the YAML change COMMIT makes (the table leaves its window);
* `statements`: the DistSQL statements, answered for `proxy.distsql.handler`.
"""
