// Typed documents, checked against the printed schema.graphql and turned into
// TypedDocumentNodes: the tests' operations (test/operations → test/generated)
// and the baton/client SDK's own (src/client/operations → src/client/generated).
import type { CodegenConfig } from "@graphql-codegen/cli";

const preset = {
  preset: "client",
  presetConfig: { fragmentMasking: false },
  config: {
    useTypeImports: true,
    enumsAsTypes: true,
    scalars: { DateTime: "string", ID: "string" },
    importExtension: ".js",
  },
} as const;

const config: CodegenConfig = {
  schema: "schema.graphql",
  ignoreNoDocuments: true,
  generates: {
    "test/generated/": { ...preset, documents: ["test/operations/**/*.graphql"] },
    "src/client/generated/": { ...preset, documents: ["src/client/operations/**/*.graphql"] },
  },
};

export default config;
