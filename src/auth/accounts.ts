// Companies and agents, each created with its key (shown once).
import type { Db } from "../db/client.js";
import { agentJson, companyJson, queryOne, sql, statement } from "../db/sql.js";
import { InvalidInputError } from "../domain/errors.js";
import { validateText } from "../domain/validate.js";
import type { Agent, Company } from "../domain/types.js";
import { generateKey } from "./keys.js";

function validName(what: string, name: string): string {
  const trimmed = name.trim();
  if (!trimmed) throw new InvalidInputError(`${what} name must not be empty`);
  return validateText(`${what} name`, trimmed, 200);
}

/** The stable key of an agent's name: lower case, runs of non-alphanumerics as one '-'. */
function nameKeyOf(name: string): string {
  return name
    .normalize("NFKC")
    .toLowerCase()
    .replace(/[^\p{L}\p{N}]+/gu, "-")
    .replace(/^-+|-+$/g, "");
}

/** Invariant: the company and its board key commit together. */
export async function createCompany(db: Db, name: string): Promise<{ company: Company; boardKey: string }> {
  const { key, hash } = generateKey("board");
  const row = await queryOne<{ company: Company }>(
    db,
    statement(
      "CREATE_COMPANY_WITH_BOARD_KEY",
      sql`
      WITH company AS (
        INSERT INTO companies (name) VALUES (${validName("company", name)}) RETURNING *
      ), key AS (
        INSERT INTO api_keys (company_id, role, key_hash) SELECT id, 'BOARD', ${hash} FROM company
      )
      SELECT ${companyJson("c")} AS company FROM company c`,
    ),
  );
  return { company: row.company, boardKey: key };
}

/** Invariant: name keys are unique within a company; the agent and its key commit together. */
export async function createAgent(db: Db, companyId: string, name: string): Promise<{ agent: Agent; apiKey: string }> {
  const clean = validName("agent", name);
  const nameKey = nameKeyOf(clean);
  if (!nameKey) throw new InvalidInputError("agent name must contain a letter or digit");
  const { key, hash } = generateKey("agent");
  const row = await queryOne<{ agent: Agent | null }>(
    db,
    statement(
      "CREATE_AGENT_WITH_KEY",
      sql`
      WITH agent AS (
        INSERT INTO agents (company_id, name, name_key) VALUES (${companyId}::uuid, ${clean}, ${nameKey})
        ON CONFLICT (company_id, name_key) DO NOTHING
        RETURNING *
      ), key AS (
        INSERT INTO api_keys (company_id, agent_id, role, key_hash) SELECT company_id, id, 'AGENT', ${hash} FROM agent
      )
      SELECT (SELECT ${agentJson("a")} FROM agent a) AS agent`,
    ),
  );
  if (!row.agent) throw new InvalidInputError(`an agent named ${JSON.stringify(clean)} (key ${nameKey}) already exists in this company`);
  return { agent: row.agent, apiKey: key };
}
