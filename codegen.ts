// Typed documents, checked against the printed schema.graphql and turned into
// TypedDocumentNodes: the tests' operations (test/operations → test/generated),
// the baton/client SDK's own (src/client/operations → src/client/generated, its
// public `Documents`) and the `baton` CLI's, with the SDK's it also uses
// (src/cli/operations and src/client/operations → src/cli/generated), and the
// MCP server's (src/mcp/operations → src/mcp/generated).
// The board's (src/board/operations → src/board/generated) are plain strings
// (documentMode "string"), so the page it runs in needs no GraphQL library.
import type { CodegenConfig } from "@graphql-codegen/cli";

const preset = {
  preset: "client",
  presetConfig: { fragmentMasking: false },
  config: {
    useTypeImports: true,
    enumsAsTypes: true,
    scalars: { DateTime: "string", ID: "string", JSON: "unknown" },
    importExtension: ".js",
  },
} as const;

const config: CodegenConfig = {
  schema: "schema.graphql",
  ignoreNoDocuments: true,
  generates: {
    "test/generated/": { ...preset, documents: ["test/operations/**/*.graphql"] },
    "src/client/generated/": { ...preset, documents: ["src/client/operations/**/*.graphql"] },
    "src/cli/generated/": { ...preset, documents: ["src/client/operations/**/*.graphql", "src/cli/operations/**/*.graphql"] },
    "src/mcp/generated/": { ...preset, documents: ["src/mcp/operations/**/*.graphql"] },
    "src/board/generated/": {
      ...preset,
      presetConfig: { ...preset.presetConfig, persistedDocuments: false },
      config: { ...preset.config, documentMode: "string" },
      documents: ["src/board/operations/**/*.graphql"],
    },
  },
};

export default config;
