// A tool of the MCP server: its fixed name, what it takes and answers (zod
// shapes the SDK turns into inputSchema and outputSchema, and checks), and
// what it does. src/mcp/server.ts registers them all.
import type { CallToolResult, ToolAnnotations } from "@modelcontextprotocol/sdk/types.js";
import type * as z from "zod";
import type { ToolContext } from "./shapes.js";

export interface Tool<I extends z.ZodRawShape, O extends z.ZodRawShape> {
  readonly name: string;
  readonly config: {
    title: string;
    description: string;
    inputSchema: I;
    outputSchema: O;
    annotations?: ToolAnnotations;
  };
  /** The answer's fields when the tool did nothing (a problem's answer adds problem and message to them). */
  readonly none: Record<string, unknown>;
  /** The issue a call is about, if any: a lost hold on it is said however the call fails (src/mcp/server.ts). */
  about?(args: z.infer<z.ZodObject<I>>): string;
  run(ctx: ToolContext, args: z.infer<z.ZodObject<I>>): Promise<CallToolResult>;
}
