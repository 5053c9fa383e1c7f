// Turning tracing on: the standard OpenTelemetry variables decide
// (docs/operations.md, Tracing). With none of them set, or OTEL_SDK_DISABLED
// =true, or OTEL_TRACES_EXPORTER=none, nothing here runs: the SDK is not even
// loaded, no provider is registered, and spans.ts's one check stays false.
//
// On: a tracer provider with the service's resource, W3C parents from callers
// (operations.ts), spans batched to an OTLP/HTTP exporter that reads its own
// variables (OTEL_EXPORTER_OTLP_[TRACES_]ENDPOINT, _HEADERS, _TIMEOUT, …), and
// the SDK's own (OTEL_TRACES_SAMPLER, OTEL_BSP_*, OTEL_RESOURCE_ATTRIBUTES).
// shutdown() flushes for at most 2 s: an unreachable collector never holds a
// stopping process. Export problems are logged as one line, at most once a
// minute, never a stack.
import { DiagLogLevel, context, diag, trace } from "@opentelemetry/api";
import type { DiagLogger } from "@opentelemetry/api";
import type { SpanExporter, SpanProcessor } from "@opentelemetry/sdk-trace-base";
import { ConfigError } from "../config.js";
import type { Logger } from "../log.js";
import { useTracer } from "./spans.js";

export interface TracingOptions {
  /** service.name, unless OTEL_SERVICE_NAME or OTEL_RESOURCE_ATTRIBUTES name one. */
  serviceName: string;
  log: Logger;
  env?: NodeJS.ProcessEnv;
  /** Tests: send every span here as it ends, whatever the variables say (tracing is then on). */
  exporter?: SpanExporter;
  /** Register as the process's global tracer provider (default true; tests that play a client's own SDK too say false). */
  global?: boolean;
}

export interface Tracing {
  readonly enabled: boolean;
  /** Stops making spans and flushes those not yet exported, waiting at most `timeoutMs` (default 2000). */
  shutdown(timeoutMs?: number): Promise<void>;
}

const OFF: Tracing = { enabled: false, shutdown: async () => {} };

/** How often an export problem may be logged. */
const PROBLEM_LOG_MS = 60_000;

const list = (raw: string | undefined) =>
  (raw ?? "")
    .split(",")
    .map((v) => v.trim().toLowerCase())
    .filter(Boolean);

/**
 * Which exporter the standard variables ask for, or null for none. Refuses
 * (ConfigError) what Baton cannot do, rather than start without the traces
 * the operator asked for: exporters other than otlp and console, and OTLP
 * over gRPC.
 */
export function tracesExporter(env: NodeJS.ProcessEnv = process.env): "otlp" | "console" | null {
  if (env.OTEL_SDK_DISABLED?.trim().toLowerCase() === "true") return null;
  const exporters = list(env.OTEL_TRACES_EXPORTER);
  if (exporters.includes("none")) return null;
  const unknown = exporters.filter((e) => e !== "otlp" && e !== "console");
  if (unknown.length) throw new ConfigError(`OTEL_TRACES_EXPORTER: Baton exports traces with otlp (over HTTP) or console, not ${unknown.join(", ")}`);
  const otlp =
    exporters.includes("otlp") ||
    (!exporters.includes("console") && Boolean(env.OTEL_EXPORTER_OTLP_ENDPOINT?.trim() || env.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT?.trim()));
  if (!otlp) return exporters.includes("console") ? "console" : null;
  // Only once traces are to go over OTLP: a protocol set for other signals (an operator's
  // injected environment) must not stop a process that exports no traces.
  for (const name of ["OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "OTEL_EXPORTER_OTLP_PROTOCOL"]) {
    const protocol = env[name]?.trim().toLowerCase();
    if (protocol && protocol !== "http/json" && protocol !== "http/protobuf") {
      throw new ConfigError(`${name}: Baton sends OTLP over HTTP (http/json), not ${protocol}; point it at the collector's HTTP port (4318)`);
    }
  }
  return "otlp";
}

/** The first line of what the SDK reports (its error handler hands over a whole error as JSON: its message only). */
function problemText(message: string): string {
  let text = message;
  if (text.startsWith("{")) {
    try {
      text = String((JSON.parse(text) as { message?: unknown }).message ?? text);
    } catch {
      // not JSON after all
    }
  }
  return text.split("\n")[0]!.slice(0, 300);
}

/**
 * The SDK's own warnings and errors. While it starts they are settings it
 * ignored (a sampler it does not know, say), each logged; after that, a
 * collector that does not answer, logged as one line at most once a minute.
 */
function problemLogger(log: Logger, starting: () => boolean): DiagLogger {
  let last = -Infinity;
  let suppressed = 0;
  const report = (message: string) => {
    if (starting()) return log("warn", "tracing: the OpenTelemetry SDK ignored a setting", { problem: problemText(String(message)) });
    const now = performance.now();
    if (now - last < PROBLEM_LOG_MS) {
      suppressed++;
      return;
    }
    last = now;
    log("warn", "tracing: could not export spans", { problem: problemText(String(message)), ...(suppressed ? { suppressedSinceLast: suppressed } : {}) });
    suppressed = 0;
  };
  const quiet = () => {};
  return { error: report, warn: report, info: quiet, debug: quiet, verbose: quiet };
}

export async function startTracing(options: TracingOptions): Promise<Tracing> {
  const env = options.env ?? process.env;
  const kind = options.exporter ? "given" : tracesExporter(env);
  if (kind === null) return OFF;
  // Loaded only now: a process without tracing never loads the SDK.
  const [sdk, resources, hooks] = await Promise.all([
    import("@opentelemetry/sdk-trace-base"),
    import("@opentelemetry/resources"),
    import("@opentelemetry/context-async-hooks"),
  ]);
  let starting = true;
  diag.setLogger(
    problemLogger(options.log, () => starting),
    { logLevel: DiagLogLevel.WARN, suppressOverrideMessage: true },
  );
  let processor: SpanProcessor;
  if (options.exporter) processor = new sdk.SimpleSpanProcessor(options.exporter);
  else if (kind === "console") processor = new sdk.BatchSpanProcessor(new sdk.ConsoleSpanExporter());
  else {
    const { OTLPTraceExporter } = await import("@opentelemetry/exporter-trace-otlp-http");
    processor = new sdk.BatchSpanProcessor(new OTLPTraceExporter());
  }
  // Only OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES (envDetector): the process detector would
  // export the command line, which may carry a token.
  const resource = resources
    .defaultResource()
    .merge(resources.resourceFromAttributes({ "service.name": options.serviceName }))
    .merge(resources.detectResources({ detectors: [resources.envDetector] }));
  const provider = new sdk.BasicTracerProvider({ resource, spanProcessors: [processor] });
  const global = options.global ?? true;
  const contexts = new hooks.AsyncLocalStorageContextManager().enable();
  const ownsContexts = context.setGlobalContextManager(contexts);
  if (!ownsContexts) contexts.disable(); // one was there already (a test's, or the host's): it propagates ours too
  if (global) trace.setGlobalTracerProvider(provider);
  useTracer(provider.getTracer("baton"));
  starting = false;
  options.log("info", "tracing on", { exporter: kind });
  let stopped: Promise<void> | null = null;
  return {
    enabled: true,
    shutdown(timeoutMs = 2000) {
      stopped ??= (async () => {
        useTracer(null);
        let timer: NodeJS.Timeout | undefined;
        const flushed = provider.shutdown().then(
          () => "flushed" as const,
          () => "failed" as const,
        );
        const outcome = await Promise.race([flushed, new Promise<"late">((resolve) => (timer = setTimeout(() => resolve("late"), timeoutMs)))]);
        clearTimeout(timer);
        if (outcome === "late") options.log("warn", "tracing: spans not exported before stopping were dropped", { waitedMs: timeoutMs });
        if (global) trace.disable();
        if (ownsContexts) context.disable();
        diag.disable();
      })();
      return stopped;
    },
  };
}
