// `baton agents`, `baton agent create | rotate-key | disable | enable` and
// `baton board rotate-key`: keys and agents (board key, or the admin token).
import * as Documents from "../generated/graphql.js";
import { companyOf, parse, table, Usage } from "../kit.js";
import type { Context } from "../kit.js";

type Agent = Documents.AgentFieldsFragment;

function printAgent(ctx: Context, agent: Agent): void {
  if (ctx.json) {
    ctx.out(JSON.stringify(agent));
    return;
  }
  for (const [k, v] of Object.entries(agent)) ctx.out(`${k.padEnd(22)} ${v ?? ""}`);
}

/**
 * A new key, shown once: with --json, {"apiKey": "…"}; otherwise the key alone
 * on stdout (so that KEY=$(baton … rotate-key …) holds just the key) and what it
 * is on stderr. It goes nowhere else: no log line, no error message.
 */
function printNewKey(ctx: Context, apiKey: string, whose: string): void {
  if (ctx.json) {
    ctx.out(JSON.stringify({ apiKey }));
    return;
  }
  ctx.err(`baton: the new key for ${whose}, shown once: keep it now. The key it replaces no longer works.`);
  ctx.out(apiKey);
}

export async function rotateAgentKey(ctx: Context, words: string[]): Promise<number> {
  const p = parse(ctx, words, "agent rotate-key ID", {}, 1);
  const agentId = p.positionals[0]!;
  const { rotateAgentKey } = await ctx.baton.request(Documents.RotateAgentKeyDocument, { agentId });
  printNewKey(ctx, rotateAgentKey.apiKey, `agent ${agentId}`);
  return 0;
}

export async function disableAgent(ctx: Context, words: string[]): Promise<number> {
  const p = parse(ctx, words, "agent disable ID --reason R", { reason: { type: "string" } }, 1);
  if (typeof p.values.reason !== "string") throw new Usage("--reason is required: baton agent disable ID --reason R");
  const { disableAgent } = await ctx.baton.request(Documents.DisableAgentDocument, { agentId: p.positionals[0]!, reason: p.values.reason });
  printAgent(ctx, disableAgent);
  return 0;
}

export async function enableAgent(ctx: Context, words: string[]): Promise<number> {
  const p = parse(ctx, words, "agent enable ID", {}, 1);
  const { enableAgent } = await ctx.baton.request(Documents.EnableAgentDocument, { agentId: p.positionals[0]! });
  printAgent(ctx, enableAgent);
  return 0;
}

export async function rotateBoardKey(ctx: Context, words: string[]): Promise<number> {
  const p = parse(ctx, words, "board rotate-key [--company ID]", { company: { type: "string" } });
  const companyId = await companyOf(ctx, p.values.company);
  const { rotateBoardKey } = await ctx.baton.request(Documents.RotateBoardKeyDocument, { companyId });
  printNewKey(ctx, rotateBoardKey.apiKey, `company ${companyId}`);
  return 0;
}

/**
 * A new agent: with --json, {agentId, name, apiKey}; otherwise its id and then
 * its key on stdout, one a line (so that a script reads both), and what they are
 * on stderr. The key is shown only this once.
 */
export async function createAgent(ctx: Context, words: string[], usage: string): Promise<number> {
  const p = parse(ctx, words, usage, {}, 1);
  const name = p.positionals[0]!;
  if (name.trim() === "") throw new Usage("NAME must not be empty: baton agent create NAME");
  const { createAgent } = await ctx.baton.request(Documents.CliCreateAgentDocument, { name });
  if (ctx.json) {
    ctx.out(JSON.stringify({ agentId: createAgent.agent.id, name: createAgent.agent.name, apiKey: createAgent.apiKey }));
    return 0;
  }
  ctx.err(`baton: agent ${JSON.stringify(createAgent.agent.name)} created: its id, then its key, shown once: keep it now (baton work runs with it).`);
  ctx.out(createAgent.agent.id);
  ctx.out(createAgent.apiKey);
  return 0;
}

/** The company's agents: name, id, state and the reason a disabled one was disabled. */
export async function listAgents(ctx: Context, words: string[], usage: string): Promise<number> {
  const p = parse(ctx, words, usage, { company: { type: "string" } });
  const companyId = await companyOf(ctx, p.values.company);
  const { agents } = await ctx.baton.request(Documents.CliAgentsDocument, { companyId });
  if (ctx.json) ctx.out(JSON.stringify(agents));
  else
    table(
      ctx,
      ["NAME", "ID", "STATE", "DISABLED REASON"],
      agents.map((a) => [a.name, a.id, a.disabledAt ? "disabled" : "enabled", a.disabledReason]),
    );
  return 0;
}
