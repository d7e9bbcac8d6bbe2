/**
 * The members of BCMS's `BCMSConfig` (`@becomes/cms-backend`'s config) that plugins read. Their
 * repository files branch on `database.fs` and name their collections with `database.prefix`.
 */
export interface BCMSConfig {
  /**
   * BCMS's local mode. `true` here: plugins then build their paths under `process.cwd()` (in an
   * isolate, the plugin's folder of `files.dir`) rather than BCMS's shared volume at the root.
   */
  local: boolean;
  database: {
    /** What collection names start with: `${BCMSConfig.database.prefix}_my-plugin_todo`. */
    prefix: string;
    /**
     * `true`: plugins take their `createFSDBRepository` branch. Both branches store on the router's
     * database, but a plugin's MongoDB branch keeps its own per-process cache (`cacheHandler`, and
     * "latches" that answer from it once a query ran), which other instances' writes never reach;
     * its FSDB branch queries through the repository, which reads the database at every call, so
     * every instance sees the same data.
     */
    fs: boolean;
  };
}

/**
 * BCMS's configuration object, as plugins read it. BCMS's own defaults: prefix `bcms`, `fs` on.
 * Mutable, as BCMS's is: a host may set `BCMSConfig.database.prefix` before plugins load.
 *
 * @example
 * const collection = `${BCMSConfig.database.prefix}_todo`;
 * const repo = BCMSConfig.database.fs ? createFSDBRepository({ ... }) : createMongoDBCachedRepository({ ... });
 */
export const BCMSConfig: BCMSConfig = {
  local: true,
  database: {
    prefix: 'bcms',
    fs: true,
  },
};
