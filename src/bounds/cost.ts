// The longest answer an operation could produce, computed before anything
// runs, and a refusal (LIMIT_EXCEEDED, maxResponseChars) when it is over the
// limit. Depth and alias limits (queryShape.ts) bound a document's shape; they do
// not bound its answer: ten aliases of `issues(first: 500)` selecting
// `description` (up to 100,000 characters each) is a 500 MB answer from an
// 876-byte query.
//
// The estimate is an upper bound, from the schema and the variables:
//   - a leaf costs its longest value (an ID 40 characters, a title 500, a
//     description 100,000, …) plus its key;
//   - a field that returns many rows multiplies what it selects by the most
//     rows its arguments allow (`first`, `limit`, the length of `inputs` or
//     `issueIds`), clamped to the argument's own maximum so that an
//     out-of-range argument gets the resolver's BAD_USER_INPUT instead;
//   - fields merge by response key and each fragment counts once per object,
//     as in execution, so repeating a spread costs nothing.
import { MAX_NOTICE_IDS } from "../events/bus.js";
import { getNamedType, isEnumType, isLeafType, isListType, isNonNullType, isObjectType, isInterfaceType, Kind } from "graphql";
import type {
  DocumentNode,
  FieldNode,
  FragmentDefinitionNode,
  GraphQLField,
  GraphQLNamedType,
  GraphQLSchema,
  GraphQLType,
  OperationDefinitionNode,
  SelectionSetNode,
  ValueNode,
} from "graphql";
import type { Plugin } from "graphql-yoga";
import type { Limits } from "./settings.js";
import { LimitExceededError } from "./settings.js";
import { MAX_CLAIM_BATCH } from "../locks/claim/claimIssues.js";
import { MAX_ISSUES_PER_CALL } from "../locks/operator/createIssues.js";
import { MAX_RELEASE_BATCH, MAX_REASON_LENGTH } from "../locks/release/releaseIssues.js";
import { ISSUE_STATUSES } from "../domain/types.js";
import { MAX_CONCURRENCY_KEY_LENGTH, MAX_DESCRIPTION_LENGTH, MAX_JSON_BYTES, MAX_TITLE_LENGTH } from "../domain/validate.js";
import { MAX_LIMITED_KEYS } from "../locks/operator/concurrencyLimits.js";
import { limitError } from "./documents.js";
import { PAGE_LIMITS } from "./pages.js";
import { MAX_BLOCKED_BY } from "../locks/graph/creation.js";
import { MAX_SUB_ISSUES_PER_CALL } from "../locks/graph/createSubIssues.js";

/** Agents are not paged; a company is assumed to have at most this many for the estimate. */
const AGENTS_ESTIMATE = 1_000;
const INTROSPECTION_CHARS = 200_000;
const NAME_LENGTH = 200;

type Args = Record<string, unknown>;

/**
 * Fields that return many rows, and the most rows their arguments allow. Lists
 * inside their answer (IssueConnection.edges, IssuesClaimed.issues, …) are
 * those same rows: SIZED_BY_PARENT. A test checks that every list field of the
 * schema is in one of the two.
 */
export const ROWS: Record<string, (args: Args) => number> = {
  "Query.issues": (a) => rows(a.first, PAGE_LIMITS.issues),
  "Query.runs": (a) => rows(a.first, PAGE_LIMITS.runs),
  "Query.lockEvents": (a) => rows(a.first, PAGE_LIMITS.lockEvents),
  "Query.agents": () => AGENTS_ESTIMATE,
  "Query.concurrencyLimits": () => MAX_LIMITED_KEYS,
  "Query.companies": (a) => rows(a.first, PAGE_LIMITS.companies),
  "Mutation.claimIssues": (a) => rows(a.limit, { fallback: 1, max: MAX_CLAIM_BATCH }),
  "Mutation.createIssues": (a) => rows(Array.isArray(a.inputs) ? a.inputs.length : 1, { fallback: 1, max: MAX_ISSUES_PER_CALL }),
  "Mutation.releaseIssues": (a) => rows(Array.isArray(a.issueIds) ? a.issueIds.length : 1, { fallback: 1, max: MAX_RELEASE_BATCH }),
  "Mutation.runHeartbeat": () => AGENTS_ESTIMATE,
  "Subscription.issuesChanged": () => MAX_NOTICE_IDS,
  "LockAudit.attemptHistogram": () => 101,
  "UnexpectedStatus.expectedStatuses": () => ISSUE_STATUSES.length,
  "Issue.subIssues": (a) => rows(a.first, PAGE_LIMITS.issues),
  "Issue.blockedBy": () => MAX_BLOCKED_BY,
  "Issue.waitingOn": () => MAX_BLOCKED_BY,
  "IssueWaiting.waitingOn": () => MAX_BLOCKED_BY,
  // a cycle's path is as long as the graph is deep: estimated at this many issues
  "DependencyCycle.path": () => 10_000,
  "Mutation.createSubIssues": (a) => rows(Array.isArray(a.inputs) ? a.inputs.length : 1, { fallback: 1, max: MAX_SUB_ISSUES_PER_CALL }),
};

export const SIZED_BY_PARENT = new Set([
  "IssueConnection.edges",
  "IssuesClaimed.issues",
  "IssuesReleased.issues",
  "IssuesReleased.refused",
  "HeartbeatTick.claims",
  "HeartbeatTick.runs",
  "SubIssuesCreated.issues",
]);

/** The longest value of a String field, where it is not the default. */
const STRING_LENGTHS: Record<string, number> = {
  "Issue.description": MAX_DESCRIPTION_LENGTH,
  "Issue.title": MAX_TITLE_LENGTH,
  "Issue.concurrencyKey": MAX_CONCURRENCY_KEY_LENGTH,
  "ConcurrencyLimit.key": MAX_CONCURRENCY_KEY_LENGTH,
  "ConcurrencyLimitReached.key": MAX_CONCURRENCY_KEY_LENGTH,
  "LockEvent.reason": MAX_REASON_LENGTH,
};
const DEFAULT_STRING_LENGTH = NAME_LENGTH;

function rows(value: unknown, limit: { fallback: number; max: number }): number {
  const n = typeof value === "number" && Number.isFinite(value) ? value : limit.fallback;
  return Math.max(1, Math.min(Math.trunc(n), limit.max));
}

/** Characters of the longest JSON value of a leaf. */
function leafWidth(parent: string, field: string, type: GraphQLNamedType): number {
  if (isEnumType(type)) return 2 + Math.max(...type.getValues().map((v) => v.name.length));
  switch (type.name) {
    case "ID":
      return 40;
    case "Int":
      return 11;
    case "Float":
      return 24;
    case "Boolean":
      return 5;
    case "DateTime":
      return 26;
    case "JSON":
      // payload and result: at most MAX_JSON_BYTES once serialised, and a character is at least a byte
      return MAX_JSON_BYTES;
    default:
      // Strings: JSON quotes; escapes can lengthen a string further, but characters, not bytes, are what is counted.
      return 2 + (STRING_LENGTHS[`${parent}.${field}`] ?? DEFAULT_STRING_LENGTH);
  }
}

function argumentValues(node: FieldNode, variables: Args, onVariable: () => void): Args {
  const out: Args = {};
  for (const arg of node.arguments ?? []) out[arg.name.value] = literal(arg.value, variables, onVariable);
  return out;
}

function literal(value: ValueNode, variables: Args, onVariable: () => void): unknown {
  switch (value.kind) {
    case Kind.VARIABLE:
      onVariable();
      return variables[value.name.value];
    case Kind.INT:
      return Number(value.value);
    case Kind.LIST:
      return value.values.map((v) => literal(v, variables, onVariable));
    default:
      return undefined; // only counts and lengths matter here
  }
}

function isList(type: GraphQLType): boolean {
  return isListType(isNonNullType(type) ? type.ofType : type);
}

/** Walk steps after which an estimate stops and answers "too large" (a safety net: the schema has no cycles). */
const MAX_STEPS = 200_000;

export class ResponseEstimate {
  private readonly fragments = new Map<string, FragmentDefinitionNode>();
  private steps = 0;
  /** Whether a row count came from a variable: then the estimate holds for these variables only. */
  usedVariables = false;

  constructor(
    private readonly schema: GraphQLSchema,
    document: DocumentNode,
    private readonly variables: Args,
  ) {
    for (const def of document.definitions) if (def.kind === Kind.FRAGMENT_DEFINITION) this.fragments.set(def.name.value, def);
  }

  /** Characters of the largest answer `operation` could have. */
  of(operation: OperationDefinitionNode): number {
    const root = this.schema.getRootType(operation.operation);
    return root ? this.object([{ set: operation.selectionSet, type: root }]) : 0;
  }

  /**
   * One JSON object made of these selection sets, merged as execution merges
   * them: fields by response key, each fragment once (so ten spreads of one
   * fragment cost what one does). Fragments on different types of a union all
   * count, which can only overestimate.
   */
  private object(sets: { set: SelectionSetNode; type: GraphQLNamedType }[], rows = 1): number {
    const fields = new Map<string, { node: FieldNode; parent: GraphQLNamedType }[]>();
    const visited = new Set<string>();
    const collect = (set: SelectionSetNode, type: GraphQLNamedType) => {
      for (const sel of set.selections) {
        if (++this.steps > MAX_STEPS) return;
        if (sel.kind === Kind.FIELD) {
          const key = sel.alias?.value ?? sel.name.value;
          const list = fields.get(key);
          if (list) list.push({ node: sel, parent: type });
          else fields.set(key, [{ node: sel, parent: type }]);
        } else if (sel.kind === Kind.INLINE_FRAGMENT) {
          const cond = sel.typeCondition ? this.schema.getType(sel.typeCondition.name.value) : type;
          if (cond) collect(sel.selectionSet, cond);
        } else if (!visited.has(sel.name.value)) {
          visited.add(sel.name.value);
          const fragment = this.fragments.get(sel.name.value);
          const cond = fragment && this.schema.getType(fragment.typeCondition.name.value);
          if (cond) collect(fragment.selectionSet, cond);
        }
      }
    };
    for (const { set, type } of sets) collect(set, type);
    let total = 2; // {}
    for (const [key, nodes] of fields) total += key.length + 4 + this.value(nodes, rows); // "key":,
    return this.steps > MAX_STEPS ? Infinity : total;
  }

  /** The largest value of one response key: its field's nodes, merged (the largest if they name different fields). */
  private value(nodes: { node: FieldNode; parent: GraphQLNamedType }[], rows: number): number {
    const byField = new Map<string, { node: FieldNode; parent: GraphQLNamedType }[]>();
    for (const n of nodes) {
      const id = `${n.parent.name}.${n.node.name.value}`;
      const list = byField.get(id);
      if (list) list.push(n);
      else byField.set(id, [n]);
    }
    let largest = 0;
    for (const group of byField.values()) largest = Math.max(largest, this.field(group, rows));
    return largest;
  }

  /**
   * A field's largest value. `rows` is what the nearest ROWS field above it
   * allows when that field answers one object (a union such as
   * ClaimIssuesResult, a connection): only the lists SIZED_BY_PARENT inside
   * it hold that many rows, not its other members (a problem's fields).
   */
  private field(group: { node: FieldNode; parent: GraphQLNamedType }[], rows: number): number {
    const { node, parent } = group[0]!;
    const name = node.name.value;
    if (name === "__typename") return 40;
    if (name === "__schema" || name === "__type") return INTROSPECTION_CHARS;
    if (!isObjectType(parent) && !isInterfaceType(parent)) return 0;
    const def: GraphQLField<unknown, unknown> | undefined = parent.getFields()[name];
    if (!def) return 0;
    const type = getNamedType(def.type);
    const sets = group.flatMap((g) => (g.node.selectionSet ? [{ set: g.node.selectionSet, type }] : []));
    const key = `${parent.name}.${name}`;
    const rowsOf = ROWS[key];
    const own = rowsOf ? rowsOf(argumentValues(node, this.variables, () => (this.usedVariables = true))) : 1;
    const list = isList(def.type);
    // a list holds its own rows, or its parent's; one object passes its rows down to the lists it holds
    const count = list ? own * (SIZED_BY_PARENT.has(key) ? rows : 1) : 1;
    const each = isLeafType(type) ? leafWidth(parent.name, name, type) : this.object(sets, list ? 1 : own);
    return count * (each + (list ? 1 : 0));
  }
}

/** Refuses, before any resolver runs, an operation whose answer could be longer than maxResponseChars. */
export function responseSizeLimit(limits: Limits, onRefused: (limit: string) => void): Plugin {
  // Estimates that no variable went into, per cached document and operation: the claim path's
  // documents come from the document cache, so their estimate is made once.
  const known = new WeakMap<DocumentNode, Map<string, number>>();
  const estimate = (schema: GraphQLSchema, document: DocumentNode, operation: OperationDefinitionNode, variables: Args) => {
    const name = operation.name?.value ?? "";
    const cached = known.get(document)?.get(name);
    if (cached !== undefined) return cached;
    const estimator = new ResponseEstimate(schema, document, variables);
    const chars = estimator.of(operation);
    if (!estimator.usedVariables) {
      const byName = known.get(document) ?? new Map<string, number>();
      known.set(document, byName.set(name, chars));
    }
    return chars;
  };
  const check = (args: { schema: GraphQLSchema; document: DocumentNode; operationName?: string | null; variableValues?: Args | null }) => {
    const operation = args.document.definitions.find(
      (d): d is OperationDefinitionNode => d.kind === Kind.OPERATION_DEFINITION && (args.operationName == null || d.name?.value === args.operationName),
    );
    if (!operation) return null;
    const chars = estimate(args.schema, args.document, operation, args.variableValues ?? {});
    if (chars <= limits.maxResponseChars) return null;
    onRefused("maxResponseChars");
    return limitError(
      new LimitExceededError(
        "maxResponseChars",
        limits.maxResponseChars,
        `the answer could be ${chars} characters long: ask for fewer rows, or leave out large fields such as description, payload and result`,
      ),
    );
  };
  return {
    onExecute({ args, setResultAndStopExecution }) {
      const error = check(args);
      if (error) setResultAndStopExecution({ errors: [error] });
    },
    onSubscribe({ args, setResultAndStopExecution }) {
      const error = check(args);
      if (error) setResultAndStopExecution({ errors: [error] });
    },
  };
}
