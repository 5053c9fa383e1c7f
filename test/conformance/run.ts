// npm run conformance -- --runs N [--seed S] [--max-commands M]
// The conformance run (test/conformance/conformance.ts) for longer than CI's
// fixed seed: N generated sequences against a fresh database cloned from the
// test template. Prints progress, the figures, and on failure the shrunk
// sequence as a replayable test; exits 1 on failure.
import setup from "../helpers/globalSetup.js";
import { createTestDatabase } from "../helpers/db.js";
import { RealWorld } from "./adapter.js";
import { runConformance } from "./conformance.js";

function arg(name: string, fallback: number): number {
  const i = process.argv.indexOf(`--${name}`);
  if (i < 0) return fallback;
  const v = Number(process.argv[i + 1]);
  if (!Number.isInteger(v)) throw new Error(`--${name} needs an integer`);
  return v;
}

const runs = arg("runs", 1000);
const seed = arg("seed", Date.now() % 2 ** 31);
const maxCommands = arg("max-commands", 8);

await setup();
const database = await createTestDatabase();
const world = await RealWorld.connect(database.url);
const started = Date.now();
let code = 0;
try {
  console.log(`conformance: ${runs} sequences, seed ${seed}, up to ${maxCommands} steps each`);
  const report = await runConformance(world, {
    runs,
    seed,
    maxCommands,
    onSequence: (n) => {
      if (n % 1000 === 0) console.log(`  ${n} sequences run, ${((Date.now() - started) / 1000).toFixed(0)} s`);
    },
  });
  const seconds = ((Date.now() - started) / 1000).toFixed(1);
  console.log(
    `${report.result.numRuns} sequences passed before the end (${report.sequences} run in all, shrinking included; ${report.commands} steps) in ${seconds} s`,
  );
  console.log(`reached: ${JSON.stringify(report.reached)}`);
  if (report.result.failed) {
    code = 1;
    console.log(`FAILED (seed ${seed}, path ${report.result.counterexamplePath}), shrunk ${report.result.numShrinks} times to:`);
    console.log(report.replayable);
  } else {
    console.log("passed");
  }
} finally {
  await world.close();
  await database.drop();
}
process.exit(code);
