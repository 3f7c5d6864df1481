/** ddz-client: the TypeScript client of ddz-server. */

export * from "./client.js";
export * from "./problems.js";
export type { components, paths } from "./schema.js";
