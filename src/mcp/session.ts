// The run is the session: what a tool needs of the MCP session it runs in.
// A session has at most one run at a time, started by its first tool call
// that needs one; a run found dead (recovered after a stall, finished) is
// forgotten and the next call starts another. `holds` remembers the lock
// epoch at which the session claimed each issue, so that a hold lost since
// is told as lost (src/mcp/tools/holds.ts), never taken for one still held.
// stdio keeps this in its process (src/mcp/stdio.ts); HTTP in PostgreSQL,
// so that any instance can answer any request (src/mcp/http/sessions.ts).

export interface Session {
  /** The session's run, started now if it has none (or its run died). */
  run(): Promise<string>;
  /** The run the session has now, if any, without starting one. */
  currentRun(): Promise<string | null>;
  /** The API answered that `runId` is not live: the session's next call needs a new run. */
  runDied(runId: string): Promise<void>;
  /** The epoch at which the session claimed `issueId`, if it did and has not released it since. */
  holdOf(issueId: string): Promise<number | undefined>;
  /** The session claimed `issueId` at `epoch` (a later claim replaces an earlier one). */
  held(issueId: string, epoch: number): Promise<void>;
  /** The session released `issueId`: it is no longer the session's to account for. */
  released(issueId: string): Promise<void>;
  /** The API refused the session's key (revoked): every hold it had is lost, and who holds them now cannot be read. */
  keyRefused(): void;
  readonly keyRevoked: boolean;
}
