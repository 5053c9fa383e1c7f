// Bounds on query shape, checked at validation time (before anything runs):
// nesting depth and the number of aliased fields. The schema's deepest useful
// query (lockEvents → issue → …) is far shallower than MAX_DEPTH.
import { GraphQLError, Kind } from "graphql";
import type { ASTVisitor, FragmentDefinitionNode, SelectionSetNode, ValidationContext } from "graphql";

export const MAX_DEPTH = 10;
export const MAX_ALIASES = 30;

/**
 * The depth of a selection set. A fragment's depth is computed once and
 * remembered (`known`): walking a fragment again at every spread makes a
 * chain of fragments that each spread the next one ten times cost 10^n
 * steps, and a 700-byte query would hold the event loop for seconds.
 */
function depthOf(
  set: SelectionSetNode | undefined,
  fragments: Map<string, FragmentDefinitionNode>,
  known: Map<string, number>,
  seen: Set<string>,
): number {
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

export function queryShapeRule(context: ValidationContext): ASTVisitor {
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
