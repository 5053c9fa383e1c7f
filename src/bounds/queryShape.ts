// Bounds on query shape, checked at validation time (before anything runs):
// nesting depth, the number of aliased fields, selections per selection set
// and fragments per document. The schema's deepest useful query (lockEvents →
// issue → …) is far shallower than MAX_DEPTH, and its widest type has fewer
// than 20 fields.
//
// The rest keep validation itself cheap: graphql-js compares the fields of a
// selection set, and the fragments of a document, pair by pair
// (OverlappingFieldsCanBeMerged), so 500 fields with arguments in one set, or
// 500 fragments, cost it 150-250 ms of the event loop within the token limit.
// shapeProblem() refuses such documents in one linear walk, before that rule
// runs: at most MAX_SELECTIONS_PER_SET selections in a set, the same field at
// most MAX_REPEATS times in a set, at most MAX_FRAGMENTS fragments.
import { GraphQLError, Kind, visit } from "graphql";
import type { ASTVisitor, DocumentNode, FragmentDefinitionNode, SelectionSetNode, ValidationContext } from "graphql";
import type { Plugin } from "graphql-yoga";

const MAX_DEPTH = 10;
const MAX_ALIASES = 30;
const MAX_SELECTIONS_PER_SET = 50;
const MAX_FRAGMENTS = 50;
/** The same field (response key) written more than this many times in one selection set. */
const MAX_REPEATS = 5;

const shapeError = (message: string) => new GraphQLError(message, { extensions: { code: "BAD_USER_INPUT" } });

/** The first way `document` is too wide to validate cheaply, or null. */
function shapeProblem(document: DocumentNode): GraphQLError | null {
  let fragments = 0;
  let widest = 0;
  let repeated: { key: string; times: number } | null = null;
  visit(document, {
    FragmentDefinition() {
      fragments++;
    },
    SelectionSet(node) {
      widest = Math.max(widest, node.selections.length);
      const times = new Map<string, number>();
      for (const sel of node.selections) {
        if (sel.kind !== Kind.FIELD) continue;
        const key = sel.alias?.value ?? sel.name.value;
        const n = (times.get(key) ?? 0) + 1;
        times.set(key, n);
        if (n > MAX_REPEATS && !repeated) repeated = { key, times: n };
      }
    },
  });
  if (fragments > MAX_FRAGMENTS) return shapeError(`query defines ${fragments} fragments; at most ${MAX_FRAGMENTS} are allowed`);
  if (widest > MAX_SELECTIONS_PER_SET) {
    return shapeError(`query selects ${widest} things in one selection set; at most ${MAX_SELECTIONS_PER_SET} are allowed`);
  }
  const r = repeated as { key: string; times: number } | null;
  if (r) return shapeError(`query asks for ${r.key} more than ${MAX_REPEATS} times in one selection set`);
  return null;
}

/**
 * Adds the shape rules to validation, and skips validation altogether for a
 * document too wide to validate cheaply. Wrapping the validation function
 * means a document whose validation is cached (documents.ts) is not walked again.
 */
export const shapeLimits: Plugin = {
  onValidate({ addValidationRule, validateFn, setValidationFn }) {
    addValidationRule(queryShapeRule);
    setValidationFn((schema, document, rules, typeInfo, options) => {
      const problem = shapeProblem(document);
      return problem ? [problem] : validateFn(schema, document, rules, typeInfo, options);
    });
  },
};

/**
 * The depth of a selection set. A fragment's depth is computed once and
 * remembered (`known`): walking a fragment again at every spread makes a
 * chain of fragments that each spread the next one ten times cost 10^n
 * steps, and a 700-byte query would hold the event loop for seconds.
 */
function depthOf(set: SelectionSetNode | undefined, fragments: Map<string, FragmentDefinitionNode>, known: Map<string, number>, seen: Set<string>): number {
  if (!set) return 0;
  let deepest = 0;
  for (const sel of set.selections) {
    if (sel.kind === Kind.FIELD) {
      if (sel.name.value.startsWith("__")) continue;
      deepest = Math.max(deepest, sel.selectionSet ? 1 + depthOf(sel.selectionSet, fragments, known, seen) : 1);
    } else if (sel.kind === Kind.INLINE_FRAGMENT) {
      deepest = Math.max(deepest, depthOf(sel.selectionSet, fragments, known, seen));
    } else {
      const name = sel.name.value;
      const fragment = fragments.get(name);
      if (!fragment || seen.has(name)) continue; // unknown or cyclic: other rules report it
      let depth = known.get(name);
      if (depth === undefined) {
        seen.add(name);
        depth = depthOf(fragment.selectionSet, fragments, known, seen);
        seen.delete(name);
        known.set(name, depth);
      }
      deepest = Math.max(deepest, depth);
    }
  }
  return deepest;
}

function queryShapeRule(context: ValidationContext): ASTVisitor {
  const doc = context.getDocument();
  const fragments = new Map<string, FragmentDefinitionNode>();
  for (const def of doc.definitions) if (def.kind === Kind.FRAGMENT_DEFINITION) fragments.set(def.name.value, def);
  const known = new Map<string, number>();
  let aliases = 0;
  return {
    Field(node) {
      if (node.alias) aliases++;
    },
    OperationDefinition: {
      enter(node) {
        const depth = depthOf(node.selectionSet, fragments, known, new Set());
        if (depth > MAX_DEPTH) {
          context.reportError(
            new GraphQLError(`query is nested ${depth} levels deep; at most ${MAX_DEPTH} are allowed`, {
              nodes: [node],
              extensions: { code: "BAD_USER_INPUT" },
            }),
          );
        }
      },
    },
    Document: {
      leave() {
        if (aliases > MAX_ALIASES) {
          context.reportError(
            new GraphQLError(`query uses ${aliases} aliases; at most ${MAX_ALIASES} are allowed`, { extensions: { code: "BAD_USER_INPUT" } }),
          );
        }
      },
    },
  };
}
