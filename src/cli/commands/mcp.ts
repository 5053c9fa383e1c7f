// `baton mcp`: an MCP server over stdio for an LLM agent (Claude Code, Codex,
// Cursor…), as the agent whose key is the token: src/mcp/stdio.ts. stdout
// carries the protocol; diagnostics go to stderr.
import { NotAnAgentKey, serveStdio, STDIO_REQUEST_TIMEOUT_MS } from "../../mcp/stdio.js";
import { MissingToken, parse, WrongKey } from "../kit.js";
import type { Context } from "../kit.js";

export const MCP_HELP = `Add it to an MCP client as a stdio server, e.g.
  claude mcp add baton --env BATON_URL=http://127.0.0.1:4000/graphql --env BATON_TOKEN=<agent key> -- npx baton mcp
The session's run starts with its first tool call that needs one and ends,
giving back what it holds, when the client closes stdin or sends SIGTERM.
Tools and a worked session: docs/agents.md.`;

export async function mcpCommand(ctx: Context, words: string[], usage: string): Promise<number> {
  if (!parse(ctx, words, usage, {})) return 0;
  if (!ctx.hasToken) throw new MissingToken();
  try {
    await serveStdio({
      // Every request bounded: a hung API must not keep a heartbeat, a tool call or the final finishRun waiting for ever.
      call: (document, variables) => ctx.baton.request(document, variables, { signal: AbortSignal.timeout(STDIO_REQUEST_TIMEOUT_MS) }),
      log: ctx.err,
    });
  } catch (err) {
    if (err instanceof NotAnAgentKey) throw new WrongKey(err.message);
    throw err;
  }
  return 0;
}
