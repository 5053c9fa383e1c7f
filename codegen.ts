// Typed documents for the tests (and any TypeScript client): the operations in
// test/operations/*.graphql are checked against the printed schema.graphql and
// turned into TypedDocumentNodes in test/generated/.
import type { CodegenConfig } from "@graphql-codegen/cli";

const config: CodegenConfig = {
  schema: "schema.graphql",
  documents: ["test/operations/**/*.graphql"],
  ignoreNoDocuments: true,
  generates: {
    "test/generated/": {
      preset: "client",
      presetConfig: { fragmentMasking: false },
      config: {
        useTypeImports: true,
        enumsAsTypes: true,
        scalars: { DateTime: "string", ID: "string" },
        importExtension: ".js",
      },
    },
  },
};

export default config;
