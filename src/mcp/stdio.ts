// `baton mcp`: one MCP session over stdio, as the agent whose key is
// BATON_TOKEN, against the API at BATON_URL. The run is the session: it starts
// on the first tool call that needs one and is heartbeaten every lease/3 while
// the process runs; when stdin closes, or on SIGTERM or Ctrl-C, the run is
// finished and what it holds goes back to the queue (RELEASED, RUN_FINISHED).
// A SIGKILLed process leaves its run to the lease and the recovery sweep.
import type { Readable, Writable } from "node:stream";
import { StdioServerTransport } from "@modelcontextprotocol/sdk/server/stdio.js";
import { BatonError } from "../client/errors.js";
import type { GraphQLCall } from "./calls.js";
import { McpFinishRunDocument, McpHeartbeatDocument, McpMeDocument, McpStartRunDocument } from "./generated/graphql.js";
import { mcpServer } from "./server.js";
import { setTimeout as delay } from "node:timers/promises";
import { Refusal } from "./tools/shapes.js";
import type { Session } from "./session.js";

/** The largest JSON-RPC message read from stdin; a longer one ends the session (the SDK's transport closes). */
const MAX_STDIO_MESSAGE_BYTES = 1024 * 1024;

/** A call that arrived as the session ended: it starts nothing. */
class SessionEnded extends Refusal {
  constructor() {
    super("SESSION_ENDED", "this MCP session is ending: nothing more is claimed");
  }
}

/** How long, once the session ends, tool calls under way may go on before the run is finished all the same. */
const END_GRACE_MS = 10_000;
/** The longest one request to the API may take (a heartbeat, a tool's operation, the final finishRun). */
export const STDIO_REQUEST_TIMEOUT_MS = 30_000;

/** Not an agent key: `baton mcp` needs one (the CLI exits 3). */
export class NotAnAgentKey extends Error {}

/** A session in this process's memory: one process, one session. */
class ProcessSession implements Session {
  private runId: string | null = null;
  private starting: Promise<string> | null = null;
  private beat: NodeJS.Timeout | null = null;
  private readonly holds = new Map<string, number>();
  keyRevoked = false;

  constructor(
    private readonly call: GraphQLCall,
    private readonly log: (line: string) => void,
  ) {}

  /** Set once the session is ending: no call may start a run after its run was finished. */
  private ending = false;

  run(): Promise<string> {
    if (this.ending) return Promise.reject(new SessionEnded());
    if (this.runId) return Promise.resolve(this.runId);
    this.starting ??= this.start().finally(() => (this.starting = null));
    return this.starting;
  }

  private async start(): Promise<string> {
    const { startRun: run } = await this.call(McpStartRunDocument, {});
    this.runId = run.id;
    // Three heartbeats per lease: two may be lost before the lease runs out.
    const leaseMs = Date.parse(run.leaseExpiresAt) - Date.parse(run.lastHeartbeatAt);
    this.beat = setInterval(() => void this.heartbeat(run.id), Math.max(100, Math.floor(leaseMs / 3)));
    return run.id;
  }

  private async heartbeat(runId: string): Promise<void> {
    try {
      const { heartbeatRun: result } = await this.call(McpHeartbeatDocument, { runId });
      if (result.__typename === "RunNotActive") {
        this.log(`baton mcp: run ${runId} is no longer live (${result.message}); the next tool call starts another`);
        await this.runDied(runId);
      }
    } catch (err) {
      if (err instanceof BatonError && err.code === "UNAUTHENTICATED") {
        this.log("baton mcp: the key was revoked: this session's holds are lost");
        this.keyRefused();
        return;
      }
      this.log(`baton mcp: heartbeat failed (${err instanceof Error ? err.message : String(err)}); trying again`);
    }
  }

  private stopBeating(): void {
    if (this.beat) clearInterval(this.beat);
    this.beat = null;
  }

  keyRefused(): void {
    this.keyRevoked = true;
    this.stopBeating();
  }

  async currentRun(): Promise<string | null> {
    return this.runId;
  }

  async runDied(runId: string): Promise<void> {
    if (this.runId !== runId) return;
    this.runId = null;
    this.stopBeating();
  }

  async holdOf(issueId: string): Promise<number | undefined> {
    return this.holds.get(issueId);
  }

  async held(issueId: string, epoch: number): Promise<void> {
    this.holds.set(issueId, epoch);
  }

  async released(issueId: string): Promise<void> {
    this.holds.delete(issueId);
  }

  /** Finishes the run (its holds go back to the queue as finishRun gives them back); no run starts after. */
  async end(): Promise<void> {
    this.ending = true;
    this.stopBeating();
    const runId = this.runId ?? (await this.starting?.catch(() => null)) ?? null;
    this.runId = null;
    if (!runId || this.keyRevoked) return;
    try {
      await this.call(McpFinishRunDocument, { runId });
    } catch (err) {
      this.log(`baton mcp: could not finish run ${runId} (${err instanceof Error ? err.message : String(err)}): its lease will run out`);
    }
  }
}

export interface StdioOptions {
  call: GraphQLCall;
  /** Diagnostics (stderr: stdout carries the protocol). */
  log: (line: string) => void;
  stdin?: Readable;
  stdout?: Writable;
}

/** Serves one session until stdin closes or SIGTERM / SIGINT; resolves once its run is finished. */
export async function serveStdio(options: StdioOptions): Promise<void> {
  const { me } = await options.call(McpMeDocument, {});
  if (me.role !== "AGENT" || !me.companyId) throw new NotAnAgentKey(`baton mcp needs an agent key (this token is the ${me.role.toLowerCase()}'s)`);
  const stdin = options.stdin ?? process.stdin;
  const session = new ProcessSession(options.call, options.log);
  const calls = new Set<Promise<unknown>>();
  const track = (call: Promise<unknown>) => {
    calls.add(call);
    void call.finally(() => calls.delete(call));
  };
  const server = mcpServer({ call: options.call, session, companyId: me.companyId, track }, (err) =>
    options.log(`baton mcp: a tool failed: ${err instanceof Error ? err.message : String(err)}`),
  );
  const stdout = options.stdout ?? process.stdout;
  const transport = new StdioServerTransport(stdin, stdout, { maxBufferSize: MAX_STDIO_MESSAGE_BYTES });
  let stop!: () => void;
  const stopped = new Promise<void>((resolve) => (stop = resolve));
  transport.onclose = stop;
  transport.onerror = (err) => options.log(`baton mcp: ${err.message}`);
  stdin.once("end", stop);
  stdin.once("close", stop);
  // The client stopped reading (EPIPE): the session is over, as if stdin had closed.
  stdout.on("error", stop);
  process.once("SIGTERM", stop);
  process.once("SIGINT", stop);
  await server.connect(transport);
  try {
    await stopped;
  } finally {
    process.removeListener("SIGTERM", stop);
    process.removeListener("SIGINT", stop);
    // No new message is read; calls under way may finish (bounded), and none can start a run once the run is finished.
    await transport.close().catch(() => {});
    await Promise.race([Promise.allSettled(calls), delay(END_GRACE_MS, undefined, { ref: false })]);
    await session.end();
    await server.close().catch(() => {});
  }
}
