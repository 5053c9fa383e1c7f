// Read by the Prisma CLI (generate, validate). DATABASE_URL is read from the
// environment directly: Prisma's env() helper throws when it is unset, which
// would break `prisma generate` on a fresh clone.
import { defineConfig } from "prisma/config";

export default defineConfig({
  schema: "prisma/schema.prisma",
  migrations: { path: "prisma/migrations" },
  datasource: { url: process.env.DATABASE_URL ?? "postgresql://localhost/baton" },
});
